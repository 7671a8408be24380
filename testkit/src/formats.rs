//! The level-format programs of `examples/formats` run from files, as `sparsec run
//! --matrix A=FILE` runs them: every shared and generated matrix (`.mtx`) and generated
//! tensors (`.tns`). Each case holds the Stage-I function, its arguments bound by the CLI's
//! own path (`driver::bind_run`: the buffer's axes say how the file is laid out, dense
//! inputs come from the seed), and the output computed densely in f64 from the file's
//! entries, as scipy or numpy would.

use crate::Rng;
use sparsec::driver::{bind_run, RunSpec};
use sparsec::formats::tensor::{parse_tns, write_tns, Tensor};
use sparsec::ir::data::{Args, Array};
use sparsec::ir::Func;
use std::path::{Path, PathBuf};

/// One program on one file.
pub struct FileCase {
    /// `program on file`.
    pub label: String,
    /// The Stage-I function.
    pub func: Func,
    /// Its arguments, bound from the file.
    pub args: Args,
    /// The output parameter.
    pub output: &'static str,
    /// The output, from the file's entries in f64.
    pub want: Vec<f32>,
    /// Integer arrays the output must equal exactly (a sparse output's row pointer and
    /// coordinates: scipy's pattern).
    pub want_ints: Vec<(&'static str, Vec<i64>)>,
}

impl FileCase {
    /// Asserts that `out`, the arrays after a run, hold the expected output.
    pub fn assert_matches(&self, out: &Args) {
        crate::assert_close(&self.label, &crate::output_f32(out, self.output), &self.want, 1e-4);
        for (name, want) in &self.want_ints {
            let got = out.arrays.get(*name).unwrap_or_else(|| panic!("{}: no `{name}`", self.label));
            let got: Vec<i64> = (0..got.len()).filter_map(|k| got.get_i64(k)).collect();
            assert_eq!(&got, want, "{}: `{name}`", self.label);
        }
    }
}

/// The programs: file stem, the modes of the tensor it reads, extra scalars, output.
const PROGRAMS: &[(&str, usize, &[(&str, &str)], &str)] = &[
    ("dcsr_spmv", 2, &[], "y"),
    ("csc_spmv", 2, &[], "y"),
    ("coo_spmv", 2, &[], "y"),
    ("sparse_dot", 1, &[], "s"),
    ("csf_ttv", 3, &[], "y"),
    ("coo_ttv", 3, &[], "y"),
    ("csf_ttm", 3, &[("rank", "3")], "y"),
    ("csf_mttkrp", 3, &[("rank", "4")], "y"),
];

/// The co-iteration programs, which read `A` and `B` (`B` a partner of `A`'s file, see
/// [`partner`]): file stem, the modes of the tensors, extra scalars, output.
const PAIR_PROGRAMS: &[(&str, usize, &[(&str, &str)], &str)] = &[
    ("coiter_add_spmv", 2, &[], "y"),
    ("coiter_mul_spmv", 2, &[], "y"),
    ("coiter_add", 2, &[], "c"),
    ("coiter_dot", 1, &[], "s"),
    ("sparse_add", 2, &[], "c"),
    ("sparse_mul", 2, &[], "c"),
    ("sparse_sddmm", 2, &[("feat", "3")], "c"),
    ("spgemm", 2, &[], "c"),
    ("masked_spgemm", 2, &[], "c"),
];

/// A second operand for `t` written into `dir`: about half of `t`'s entries (other values)
/// and as many new ones at random coordinates, so that two rows share some coordinates and
/// not others, and some rows of one operand are empty where the other's are not.
fn partner(dir: &Path, name: &str, t: &Tensor<i64, f64>) -> PathBuf {
    let mut rng = Rng::new(0xb0b + t.nnz() as u64);
    let n = t.dims().len();
    let mut coords = vec![Vec::new(); n];
    let mut values = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut push = |at: Vec<i64>, v: f64, coords: &mut Vec<Vec<i64>>, values: &mut Vec<f64>| {
        if seen.insert(at.clone()) {
            for (d, c) in at.into_iter().enumerate() {
                coords[d].push(c);
            }
            values.push(v);
        }
    };
    for e in 0..t.nnz() {
        if rng.below(2) == 0 {
            push((0..n).map(|d| t.coords(d)[e]).collect(), (rng.f32() * 4.0 - 2.0) as f64, &mut coords, &mut values);
        }
    }
    for _ in 0..t.nnz().div_ceil(2) {
        let at = t.dims().iter().map(|&d| rng.below(d) as i64).collect();
        push(at, (rng.f32() * 4.0 - 2.0) as f64, &mut coords, &mut values);
    }
    if n == 2 {
        // A Matrix Market file states its shape.
        let mut coo = sparsec::formats::Coo::<i64, f64>::zeros(t.dims()[0], t.dims()[1]).unwrap();
        for (e, v) in values.iter().enumerate() {
            coo.push(coords[0][e] as usize, coords[1][e] as usize, *v).unwrap();
        }
        let path = dir.join(format!("{name}-partner.mtx"));
        sparsec::formats::mtx::write_mtx_coo(std::fs::File::create(&path).unwrap(), &coo).unwrap();
        return path;
    }
    // A `.tns` file's shape is its largest coordinates: the last corner keeps `t`'s.
    push(t.dims().iter().map(|&d| d as i64 - 1).collect(), 1.0, &mut coords, &mut values);
    let b = Tensor::try_new(t.dims().to_vec(), coords, values).expect("coordinates in range");
    let path = dir.join(format!("{name}-partner.tns"));
    std::fs::write(&path, write_tns(&b)).unwrap();
    path
}

/// `examples/formats/<stem>.sptir`, parsed.
pub fn program(stem: &str) -> Func {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/formats").join(format!("{stem}.sptir"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    sparsec::ir::text::parse_func(&path.display().to_string(), &text).unwrap_or_else(|e| panic!("{e}"))
}

/// Random tensors of order `n` (repeated coordinates, empty slices, one entry), written
/// into `dir` as `.tns` files.
fn tensors(dir: &Path, n: usize) -> Vec<(String, PathBuf)> {
    let mut rng = Rng::new(0x7e45 + n as u64);
    let shapes: &[(&str, usize, usize)] = &[("small", 6, 40), ("skewed", 30, 700), ("sparse", 50, 30), ("one", 4, 1)];
    let mut out = Vec::new();
    for &(name, side, nnz) in shapes {
        let dims: Vec<usize> = (0..n).map(|d| side + d).collect();
        let mut coords = vec![Vec::new(); n];
        let mut values = Vec::new();
        for _ in 0..nnz {
            for (d, c) in coords.iter_mut().enumerate() {
                // The first mode is skewed: low coordinates are far more likely.
                let x = if d == 0 && name == "skewed" { rng.below(dims[d]) * rng.below(dims[d]) / dims[d] } else { rng.below(dims[d]) };
                c.push(x as i64);
            }
            values.push((rng.f32() * 4.0 - 2.0) as f64);
        }
        let t = Tensor::try_new(dims, coords, values).expect("coordinates in range");
        let path = dir.join(format!("tns{n}d-{name}.tns"));
        std::fs::write(&path, write_tns(&t)).unwrap();
        out.push((format!("tns{n}d-{name}"), path));
    }
    out
}

/// Every shared and generated matrix as a `.mtx` file (generated ones written into `dir`),
/// by name: what `--matrix` reads in the tests that run programs from files.
pub fn matrix_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut files = sparsec::formats::shared_matrices();
    assert!(!files.is_empty(), "no .mtx file in {} (set SPARSEC_DATA)", sparsec::formats::data_dir().display());
    for (name, m) in crate::generated_matrices() {
        let p = dir.join(format!("{name}.mtx"));
        sparsec::formats::mtx::write_mtx_path(&p, &m.to_csr()).unwrap();
        files.push((name, p));
    }
    files
}

/// The entries of a file, as a tensor (Matrix Market symmetric files expanded).
fn entries(path: &Path) -> Tensor<i64, f64> {
    let bytes = std::fs::read(path).unwrap();
    if path.extension().is_some_and(|e| e == "tns") {
        parse_tns(&bytes).unwrap()
    } else {
        Tensor::from(&sparsec::formats::mtx::parse_mtx::<i64, f64>(&bytes).unwrap().1)
    }
}

fn input(args: &Args, name: &str) -> Vec<f64> {
    match args.arrays.get(name) {
        Some(Array::F32(v)) => v.iter().map(|&x| f64::from(x)).collect(),
        other => panic!("input `{name}`: {other:?}"),
    }
}

fn int(args: &Args, name: &str) -> usize {
    match args.scalars.get(name) {
        Some(sparsec::ir::data::Scalar::Int(v)) => *v as usize,
        other => panic!("scalar `{name}`: {other:?}"),
    }
}

/// The output of `stem` from the entries of `t` and the bound inputs, in f64.
fn reference(stem: &str, t: &Tensor<i64, f64>, args: &Args) -> Vec<f32> {
    let c = |d: usize, e: usize| t.coords(d)[e] as usize;
    let mut y: Vec<f64>;
    match stem {
        "dcsr_spmv" | "csc_spmv" | "coo_spmv" => {
            let x = input(args, "x");
            y = vec![0.0; t.dims()[0]];
            for e in 0..t.nnz() {
                y[c(0, e)] += t.values()[e] * x[c(1, e)];
            }
        }
        "sparse_dot" => {
            let x = input(args, "x");
            y = vec![(0..t.nnz()).map(|e| t.values()[e] * x[c(0, e)]).sum()];
        }
        "csf_ttv" | "coo_ttv" => {
            let v = input(args, "v");
            let d1 = t.dims()[1];
            y = vec![0.0; t.dims()[0] * d1];
            for e in 0..t.nnz() {
                y[c(0, e) * d1 + c(1, e)] += t.values()[e] * v[c(2, e)];
            }
        }
        "csf_ttm" => {
            let (u, r) = (input(args, "u"), int(args, "rank"));
            let d1 = t.dims()[1];
            y = vec![0.0; t.dims()[0] * d1 * r];
            for e in 0..t.nnz() {
                for q in 0..r {
                    y[(c(0, e) * d1 + c(1, e)) * r + q] += t.values()[e] * u[c(2, e) * r + q];
                }
            }
        }
        "csf_mttkrp" => {
            let (b, cc, r) = (input(args, "b"), input(args, "c"), int(args, "rank"));
            y = vec![0.0; t.dims()[0] * r];
            for e in 0..t.nnz() {
                for q in 0..r {
                    y[c(0, e) * r + q] += t.values()[e] * b[c(1, e) * r + q] * cc[c(2, e) * r + q];
                }
            }
        }
        _ => panic!("no reference for {stem}"),
    }
    y.into_iter().map(|v| v as f32).collect()
}

/// The output of co-iteration program `stem` from the entries of `a` and `b` and the bound
/// inputs, in f64 (duplicates summed, as binding sums them), and the integer arrays it must
/// give exactly (a sparse output's pattern, as scipy's `A + B` and `A.multiply(B)` give it
/// where no sum cancels to zero: every stored coordinate, ascending in each row).
fn pair_reference(stem: &str, a: &Tensor<i64, f64>, b: &Tensor<i64, f64>, args: &Args) -> (Vec<f32>, Vec<(&'static str, Vec<i64>)>) {
    use std::collections::BTreeMap;
    let sum = |t: &Tensor<i64, f64>| {
        let mut m: BTreeMap<Vec<i64>, f64> = BTreeMap::new();
        for e in 0..t.nnz() {
            *m.entry((0..t.dims().len()).map(|d| t.coords(d)[e]).collect()).or_default() += t.values()[e];
        }
        m
    };
    let (ma, mb) = (sum(a), sum(b));
    let y: Vec<f64> = match stem {
        "coiter_add_spmv" | "coiter_mul_spmv" => {
            let x = input(args, "x");
            let mut y = vec![0.0; a.dims()[0]];
            if stem == "coiter_add_spmv" {
                for (k, v) in ma.iter().chain(&mb) {
                    y[k[0] as usize] += v * x[k[1] as usize];
                }
            } else {
                for (k, v) in &ma {
                    if let Some(w) = mb.get(k) {
                        y[k[0] as usize] += v * w * x[k[1] as usize];
                    }
                }
            }
            y
        }
        "coiter_add" => {
            // Entries outside both patterns keep what the output held (the binder's zeros).
            let cols = a.dims()[1];
            let mut c = vec![0.0; a.dims()[0] * cols];
            for (k, v) in ma.iter().chain(&mb) {
                c[k[0] as usize * cols + k[1] as usize] += v;
            }
            c
        }
        "coiter_dot" => vec![ma.iter().filter_map(|(k, v)| mb.get(k).map(|w| v * w)).sum()],
        "masked_spgemm" => {
            // At each coordinate of A's pattern (the mask), in CSR order: row i of A times
            // column k of B.
            return (
                ma.keys()
                    .map(|k| {
                        let row = ma.range(vec![k[0], i64::MIN]..=vec![k[0], i64::MAX]);
                        row.filter_map(|(ka, v)| mb.get(&vec![ka[1], k[1]]).map(|w| v * w)).sum::<f64>() as f32
                    })
                    .collect(),
                vec![],
            );
        }
        "sparse_add" | "sparse_mul" | "sparse_sddmm" | "spgemm" => {
            // The BTreeMaps iterate row by row, columns ascending: CSR order.
            let mut c: BTreeMap<&Vec<i64>, f64> = BTreeMap::new();
            let mut products: BTreeMap<Vec<i64>, f64> = BTreeMap::new();
            if stem == "spgemm" {
                // Gustavson: row i of A picks rows of B.
                for (ka, v) in &ma {
                    for (kb, w) in mb.range(vec![ka[1], i64::MIN]..=vec![ka[1], i64::MAX]) {
                        *products.entry(vec![ka[0], kb[1]]).or_default() += v * w;
                    }
                }
                c.extend(products.iter().map(|(k, v)| (k, *v)));
            } else if stem == "sparse_add" {
                for (k, v) in ma.iter().chain(&mb) {
                    *c.entry(k).or_default() += v;
                }
            } else {
                c.extend(ma.iter().filter_map(|(k, v)| mb.get(k).map(|w| (k, v * w))));
            }
            if stem == "sparse_sddmm" {
                let (x, y, f) = (input(args, "x"), input(args, "y"), int(args, "feat"));
                for (k, v) in c.iter_mut() {
                    let (i, j) = (k[0] as usize, k[1] as usize);
                    *v *= (0..f).map(|q| x[i * f + q] * y[j * f + q]).sum::<f64>();
                }
            }
            let mut ptr = vec![0i64; a.dims()[0] + 1];
            for k in c.keys() {
                ptr[k[0] as usize + 1] += 1;
            }
            for r in 0..a.dims()[0] {
                ptr[r + 1] += ptr[r];
            }
            let ints = vec![("c_indptr", ptr), ("c_indices", c.keys().map(|k| k[1]).collect())];
            return (c.values().map(|&v| v as f32).collect(), ints);
        }
        _ => panic!("no reference for {stem}"),
    };
    (y.into_iter().map(|v| v as f32).collect(), vec![])
}

/// Every program on every file it reads (the files written into `dir`); `max_nnz` skips
/// larger files (for slow backends).
pub fn file_cases(dir: &Path, max_nnz: usize) -> Vec<FileCase> {
    std::fs::create_dir_all(dir).unwrap();
    let mats = matrix_files(dir);
    let mut out = Vec::new();
    for &(stem, order, scalars, output) in PROGRAMS {
        let func = program(stem);
        let files = if order == 2 { mats.clone() } else { tensors(dir, order) };
        for (name, path) in files {
            let t = entries(&path);
            if t.nnz() > max_nnz {
                continue;
            }
            let spec = RunSpec {
                matrices: vec![("A".into(), path.clone())],
                scalars: scalars.iter().map(|&(k, v)| (k.to_string(), v.to_string())).collect(),
                seed: 7,
                ..RunSpec::default()
            };
            let label = format!("{stem} on {name}");
            let args = bind_run(&func, &spec).unwrap_or_else(|e| panic!("{label}: {e}"));
            let want = reference(stem, &t, &args);
            out.push(FileCase { label, func: func.clone(), args, output, want, want_ints: vec![] });
        }
    }
    for &(stem, order, ..) in PAIR_PROGRAMS {
        let files = if order == 2 { mats.clone() } else { tensors(dir, order) };
        for (name, path) in files {
            let a = entries(&path);
            // A dense output of every row and column stays small; A·B needs a square A (its
            // partner has A's shape) and stays at a size the interpreter multiplies quickly.
            let product = matches!(stem, "spgemm" | "masked_spgemm") && (a.dims()[0] != a.dims()[1] || a.nnz() > 40_000);
            if a.nnz() > max_nnz || product || (stem == "coiter_add" && a.dims().iter().product::<usize>() > 1 << 22) {
                continue;
            }
            out.push(pair_case(dir, stem, &name, &path));
        }
    }
    out
}

/// Co-iteration program `stem` (one of the pair programs: `spgemm`, `sparse_add`, ...) on the
/// file `path` named `name` and its partner (written into `dir`).
pub fn pair_case(dir: &Path, stem: &str, name: &str, path: &Path) -> FileCase {
    let &(_, _, scalars, output) = PAIR_PROGRAMS.iter().find(|p| p.0 == stem).unwrap_or_else(|| panic!("no pair program `{stem}`"));
    let func = program(stem);
    let a = entries(path);
    let other = partner(dir, name, &a);
    let b = entries(&other);
    let mut files = vec![("A", path.to_path_buf()), ("B", other)];
    if stem == "masked_spgemm" {
        // The mask: A's own pattern (C = A ⊙ (A·B)).
        files.push(("C", path.to_path_buf()));
    }
    let spec = RunSpec {
        matrices: files.iter().map(|(k, p)| (k.to_string(), p.clone())).collect(),
        scalars: scalars.iter().map(|&(k, v)| (k.to_string(), v.to_string())).collect(),
        seed: 7,
        ..RunSpec::default()
    };
    let label = format!("{stem} on {name}");
    let args = bind_run(&func, &spec).unwrap_or_else(|e| panic!("{label}: {e}"));
    let (want, want_ints) = pair_reference(stem, &a, &b, &args);
    FileCase { label, func, args, output, want, want_ints }
}
