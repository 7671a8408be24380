//! The `sparsec` command line, end to end.

use sparsec_testkit as common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn sparsec(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sparsec"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("sparsec runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The first matrix of the shared data folder; fails with the folder's state when there is none.
fn first_shared_matrix() -> PathBuf {
    let dir = sparsec::formats::data_dir();
    let found = sparsec::formats::shared_matrices();
    let (_, path) = found.into_iter().next().unwrap_or_else(|| {
        panic!("no .mtx in {} ({:?})", dir.display(), std::fs::read_dir(&dir).map(|d| d.count()))
    });
    path
}

/// The first lines of two `run` outputs (`C  16024 elements  sum +2.234052e11  l2 ...`) name
/// the same buffer and element count, and their checksums agree to a relative 1e-5 (a
/// contracted schedule rounds its multiply-adds once).
fn assert_same_summary(got: &Output, want: &Output, what: &str) {
    let first = |o: &Output| stdout(o).lines().next().unwrap_or_default().to_string();
    let (g, w) = (first(got), first(want));
    let words = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    let (gw, ww) = (words(&g), words(&w));
    assert_eq!(gw.len(), ww.len(), "{what}: {g} vs {w}");
    for (a, b) in gw.iter().zip(&ww) {
        match (a.parse::<f64>(), b.parse::<f64>()) {
            (Ok(x), Ok(y)) => assert!((x - y).abs() <= 1e-5 * x.abs().max(y.abs()), "{what}: {g} vs {w}"),
            _ => assert_eq!(a, b, "{what}: {g} vs {w}"),
        }
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sparsec-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn lower_prints_all_three_stages() {
    let o = sparsec(&["lower", "examples/csrmm.sptir"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for s in ["I", "II", "III"] {
        assert!(out.contains(&format!("# ===== Stage {s}: csrmm =====")), "{out}");
    }
    // The printed stages are themselves valid programs.
    for chunk in out.split("# ===== ").skip(1) {
        let body = chunk.split_once('\n').unwrap().1;
        let f = sparsec::ir::text::parse_func("stage", body).unwrap_or_else(|e| panic!("{e}"));
        sparsec::ir::verify::verify_func(&f).unwrap();
    }
    assert!(out.contains("C[vi * feat + vk] = C[vi * feat + vk] + A[J_indptr[vi] + vj]"), "{out}");
}

#[test]
fn lower_one_stage() {
    let o = sparsec(&["lower", "examples/csrmm.sptir", "--stage", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("func csrmm(") && out.contains("stage II {"), "{out}");
    assert!(!out.contains("stage III") && !out.contains("====="), "{out}");
}

#[test]
fn fmt_is_canonical_and_check_passes() {
    let o = sparsec(&["fmt", "tests/workloads/sddmm.sptir"]);
    assert!(o.status.success());
    let dir = tmp("fmt");
    let path = dir.join("sddmm.sptir");
    std::fs::write(&path, stdout(&o)).unwrap();
    let again = sparsec(&["fmt", path.to_str().unwrap()]);
    assert_eq!(stdout(&again), stdout(&o));
    let c = sparsec(&["check", path.to_str().unwrap()]);
    assert!(c.status.success() && stdout(&c).contains("ok (1 function(s))"), "{}", stdout(&c));
    // The workload's header comment survives.
    assert!(stdout(&o).starts_with("# Sampled dense-dense matmul"), "{}", stdout(&o));
}

#[test]
fn bad_input_fails_with_a_location() {
    let dir = tmp("bad");
    let path = dir.join("bad.sptir");
    std::fs::write(&path, "func f(a: handle) {\n  axis I = dense_fixed(q)\n}\n").unwrap();
    let o = sparsec(&["check", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("bad.sptir:2:24: unknown variable `q`"), "{err}");
    assert!(err.contains("^"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    std::fs::write(&path, "func f(a: handle, n: i32) {\n  axis I = dense_fixed(n)\n  sp_iter s([I], \"SR\") as [i] {\n  }\n}\n").unwrap();
    let o = sparsec(&["check", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("bad.sptir:3:3:"), "{}", stderr(&o));
}

#[test]
fn run_writes_outputs_that_match_a_dense_product() {
    let Some((_, cora)) = sparsec::formats::shared_matrices().into_iter().find(|(n, _)| n == "cora") else {
        return; // no shared data on this machine
    };
    let dir = tmp("run");
    let b_path = dir.join("b.npy");
    // B: 2708 × 3, entries (j + k) / 1000.
    let feat = 3usize;
    let b: Vec<f32> = (0..2708 * feat).map(|x| ((x / feat + x % feat) % 17) as f32 / 16.0).collect();
    sparsec::npy::write(&b_path, &sparsec::ir::data::Array::F32(b.clone()), &[2708, feat as u64]).unwrap();
    let mut sums = Vec::new();
    for stage in ["1", "3"] {
        let out_dir = dir.join(format!("out{stage}"));
        let o = sparsec(&[
            "run",
            "tests/workloads/csrmm.sptir",
            "--matrix",
            &format!("A={}", cora.display()),
            "--input",
            &format!("B={}", b_path.display()),
            "--feat",
            "3",
            "--stage",
            stage,
            "--output",
            out_dir.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let text = stdout(&o);
        assert!(text.contains(&format!("stage {} on interp", if stage == "1" { "I" } else { "III" })), "{text}");
        sums.push(text.lines().next().unwrap().to_string());
        let sparsec::ir::data::Array::F32(c) = sparsec::npy::read(&out_dir.join("C.npy")).unwrap() else { panic!() };
        let m = &common::shared_matrices().into_iter().find(|(n, _)| n == "cora").unwrap().1;
        let dense = m.to_dense();
        let want: Vec<f32> = (0..m.rows * feat)
            .map(|x| {
                let (i, k) = (x / feat, x % feat);
                (0..m.cols).fold(0f32, |acc, j| acc + dense[i * m.cols + j] * b[j * feat + k])
            })
            .collect();
        common::assert_close("csrmm C", &c, &want, 1e-5);
    }
    assert_eq!(sums[0], sums[1], "the checksums agree across stages");
}

#[test]
fn run_reports_missing_scalars_and_bad_matrices() {
    let o = sparsec(&["run", "tests/workloads/csrmm.sptir"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("pass --scalar"), "{}", stderr(&o));

    let dir = tmp("badmtx");
    let p = dir.join("bad.mtx");
    std::fs::write(&p, "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1.0\n").unwrap();
    let o = sparsec(&["run", "tests/workloads/csrmm.sptir", "--matrix", &format!("A={}", p.display()), "--feat", "2"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("line 3") || err.contains(":3:"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn run_binds_a_ragged_axis_whose_length_is_nnz() {
    // segment_reduce declares J = dense_variable(I, nnz, nnz, indptr): the length is an upper
    // bound that shares its scalar with nnz. A pattern matrix sums to its nnz per row.
    let Some((_, dwt)) = sparsec::formats::shared_matrices().into_iter().find(|(n, _)| n == "dwt_992") else {
        return;
    };
    let o = sparsec(&["run", "tests/workloads/segment_reduce.sptir", "--matrix", &format!("A={}", dwt.display()), "--stage", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("B                   992 elements  sum +1.674400e4"), "{}", stdout(&o));
}

#[test]
fn passes_are_listed_and_printed_after() {
    let o = sparsec(&["passes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for p in sparsec::passes::PASSES {
        assert!(stdout(&o).lines().any(|l| l.starts_with(p.name) && l.contains(p.about)), "{}", stdout(&o));
    }
    // After named steps and passes, each dump a valid program, in order.
    let o = sparsec(&["lower", "examples/csrmm.sptir", "--auto", "cpu", "--print-after", "parallel", "--print-after", "lower_sparse_buffer"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let heads: Vec<&str> = out.lines().filter(|l| l.starts_with("# ===== after ")).collect();
    assert_eq!(heads.len(), 2, "{out}");
    assert!(heads[0].starts_with("# ===== after parallel (step ") && heads[1].starts_with("# ===== after lower_sparse_buffer"), "{out}");
    let dumps: Vec<sparsec::ir::Func> = out
        .split("# ===== ")
        .skip(1)
        .map(|chunk| sparsec::ir::text::parse_func("dump", chunk.split_once('\n').unwrap().1).unwrap())
        .collect();
    assert_eq!((dumps[0].stage, dumps[1].stage), (sparsec::ir::Stage::II, sparsec::ir::Stage::III));
    assert!(out.contains("for i in parallel(m)"), "{out}");
    // `all` prints after every transforming step and pass, never after a getter.
    let o = sparsec(&["lower", "examples/csrmm.sptir", "--auto", "cpu", "--print-after", "all"]);
    let out = stdout(&o);
    assert!(out.contains("after lower_sparse_iter") && out.contains("after vectorize") && !out.contains("after get_"), "{out}");
    // A name that never ran is an error that says what did.
    let o = sparsec(&["lower", "examples/csrmm.sptir", "--print-after", "splitt"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--print-after splitt: no pass or step of that name ran (ran: lower_sparse_iter, lower_sparse_buffer)"), "{}", stderr(&o));
}

#[test]
fn run_refuses_unclear_requests_with_a_way_forward() {
    let path = first_shared_matrix();
    let mat = format!("A={}", path.display());
    let o = sparsec(&["run", "examples/csrmm.sptir", "--matrix", &mat, "--feat", "4", "--stage", "all"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("run takes one stage (--stage 1, 2 or 3), not `all`"), "{}", stderr(&o));
    let o = sparsec(&["run", "examples/csrmm.sptir", "--matrix", &mat, "--feat", "4", "--backend", "cubecl-cuda"]);
    if !o.status.success() && stderr(&o).contains("without the `cuda` feature") {
        assert!(stderr(&o).contains("scripts/build-cuda"), "{}", stderr(&o));
    }
    let o = sparsec(&["run", "examples/csrmm.sptir", "--matrix", &mat, "--feat", "4", "--input", "BB=x.npy"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("`csrmm` has no parameter or buffer `BB` (did you mean `B`?)"), "{}", stderr(&o));
    let o = sparsec(&["run", "--help"]);
    assert!(stdout(&o).contains("generated code") && !stdout(&o).contains("with the reference interpreter."), "{}", stdout(&o));
}

#[test]
fn lower_applies_a_schedule_trace() {
    use sparsec::ir::ThreadTag;
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/csrmm.sptir")).unwrap();
    let f = sparsec::ir::text::parse_func("csrmm", &text).unwrap();
    let mut sch = sparsec::schedule::Schedule::new(f).unwrap();
    let sp = sch.get_sparse_iteration("csrmm").unwrap();
    sch.annotate(sp, "schedule", sparsec::ir::AttrValue::Str("row-per-block".into())).unwrap();
    sch.lower_sparse_iter().unwrap();
    let block = sch.get_block("csrmm0").unwrap();
    let i = sch.get_loops(block).unwrap()[0];
    sch.bind(i, ThreadTag::BlockIdxX).unwrap();
    let dir = tmp("sched");
    let path = dir.join("trace.json");
    std::fs::write(&path, sch.trace().to_json()).unwrap();

    let o = sparsec(&["lower", "examples/csrmm.sptir", "--schedule", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("sp_iter csrmm([I, J, K], \"SRS\") as [i, j, k] attrs(schedule = \"row-per-block\")"), "{out}");
    assert_eq!(out.matches("for i in blockIdx.x(m)").count(), 2, "Stage II and III are bound: {out}");

    // The scheduled program runs and agrees with the plain one.
    if let Some((_, m)) = sparsec::formats::shared_matrices().into_iter().find(|(n, _)| n == "dwt_992") {
        let mat = format!("A={}", m.display());
        let base = sparsec(&["run", "examples/csrmm.sptir", "--matrix", &mat, "--feat", "4", "--stage", "3"]);
        let sched = sparsec(&[
            "run", "examples/csrmm.sptir", "--matrix", &mat, "--feat", "4", "--stage", "3", "--schedule", path.to_str().unwrap(),
        ]);
        assert!(sched.status.success(), "{}", stderr(&sched));
        assert_same_summary(&sched, &base, "scheduled");
    }

    std::fs::write(&path, "{ not json").unwrap();
    let o = sparsec(&["lower", "examples/csrmm.sptir", "--schedule", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not a schedule trace"), "{}", stderr(&o));
}

#[test]
fn auto_schedules_print_and_run() {
    let o = sparsec(&["lower", "examples/csrmm.sptir", "--auto", "gpu", "--stage", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    // SpMM's shape: rows on the warps of blocks (4 per block), features on the lanes of a
    // warp, C in a register.
    assert!(
        out.contains("for i_0 in blockIdx.x((m + 3) // 4)") && out.contains("threadIdx.y(4)") && out.contains("threadIdx.x(32)") && out.contains("C_local"),
        "{out}"
    );
    let o = sparsec(&["lower", "examples/csrmm.sptir", "--auto", "cpu", "--stage", "3"]);
    // Rows in chunks balanced by nonzeros, run in parallel.
    let out = stdout(&o);
    assert!(out.contains("for i_p in parallel(i_chunks)") && out.contains("start = i_bounds[i_p]") && out.contains("vectorized(feat)"), "{out}");

    let path = first_shared_matrix();
    let mat = format!("A={}", path.display());
    let base = sparsec(&["run", "examples/csrmm.sptir", "--matrix", &mat, "--feat", "4"]);
    assert!(base.status.success(), "{}", stderr(&base));
    for auto in ["cpu", "gpu"] {
        let o = sparsec(&["run", "examples/csrmm.sptir", "--matrix", &mat, "--feat", "4", "--auto", auto]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_same_summary(&o, &base, &format!("--auto {auto}"));
        assert!(stdout(&o).contains("stage III on interp"), "{}", stdout(&o));
    }
}

#[test]
fn code_generators_take_stage_iii_only() {
    let o = sparsec(&["run", "examples/csrmm.sptir", "--scalar", "m=1", "--backend", "mlir-cpu", "--stage", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("the mlir-cpu backend runs Stage III only"), "{}", stderr(&o));
}

#[test]
fn mlir_emission_and_cpu_runs() {
    let o = sparsec(&["lower", "examples/csrmm.sptir", "--emit", "mlir", "--auto", "gpu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("gpu.module") && out.contains("gpu.launch_func") && out.contains("gpu.func"), "{out}");
    for chip in ["sm_80", "sm_90"] {
        let o = sparsec(&["lower", "examples/csrmm.sptir", "--emit", "ptx", "--chip", chip, "--auto", "gpu"]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stdout(&o).contains(&format!(".target {chip}")), "{}", stdout(&o));
    }
    let o = sparsec(&["lower", "examples/csrmm.sptir", "--emit", "ptx", "--chip", "sm_xx"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));

    let path = first_shared_matrix();
    let mat = format!("A={}", path.display());
    let base = sparsec(&["run", "examples/csrmm.sptir", "--matrix", &mat, "--feat", "8"]);
    for extra in [&[][..], &["--auto", "cpu"][..], &["--auto", "gpu"][..]] {
        let mut args = vec!["run", "examples/csrmm.sptir", "--matrix", &mat, "--feat", "8", "--backend", "mlir-cpu"];
        args.extend_from_slice(extra);
        let o = sparsec(&args);
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        assert_same_summary(&o, &base, &format!("{extra:?}"));
        assert!(stdout(&o).contains("stage III on mlir-cpu"), "{}", stdout(&o));
    }
}

#[test]
fn cubecl_emission_and_wgpu_runs() {
    let o = sparsec(&["lower", "examples/csrmm.sptir", "--emit", "cubecl", "--auto", "gpu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("#[cube(launch)]"), "{}", stdout(&o));
    let o = sparsec(&["lower", "examples/csrmm.sptir", "--emit", "wgsl", "--auto", "gpu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("@compute"), "{}", stdout(&o));
    let o = sparsec(&["lower", "examples/csrmm.sptir", "--emit", "cuda", "--auto", "gpu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("__global__"), "{}", stdout(&o));

    let path = first_shared_matrix();
    let mat = format!("A={}", path.display());
    let base = sparsec(&["run", "examples/csrmm.sptir", "--matrix", &mat, "--feat", "8"]);
    for extra in [&[][..], &["--auto", "gpu"][..]] {
        let mut args = vec!["run", "examples/csrmm.sptir", "--matrix", &mat, "--feat", "8", "--backend", "cubecl-wgpu"];
        args.extend_from_slice(extra);
        let o = sparsec(&args);
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        assert_same_summary(&o, &base, &format!("{extra:?}"));
    }
    // cora's rows vary: the GPU default runs them as row segments, with the same result.
    let cora = format!("A={}", sparsec::formats::data_dir().join("cora.mtx").display());
    let base = sparsec(&["run", "examples/csrmm.sptir", "--matrix", &cora, "--feat", "8"]);
    let o = sparsec(&["run", "examples/csrmm.sptir", "--matrix", &cora, "--feat", "8", "--backend", "cubecl-wgpu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("segments of at most 32 entries"), "{}", stdout(&o));
    assert_same_summary(&o, &base, "cora on cubecl-wgpu");
    let o = sparsec(&["run", "examples/csrmm.sptir", "--matrix", &mat, "--feat", "8", "--backend", "cubecl-cuda"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
}

/// csrmm with `BODY_J` as the declaration of `J_detach` and `ACCESS` as the load of B.
const CSRMM_VARIANT: &str = "func csrmm(a: handle, b: handle, c: handle, indptr: handle, indices: handle, m: i32, n: i32, feat_size: i32, nnz: i32) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz, indptr, indices)
  axis J_detach = BODY_J
  axis K = dense_fixed(feat_size)
  buffer A = match_sparse_buffer(a, [I, J], f32)
  buffer B = match_sparse_buffer(b, [J_detach, K], f32)
  buffer C = match_sparse_buffer(c, [I, K], f32)
  sp_iter csrmm([I, J, K], \"SRS\") as [i, j, k] {
    init {
      C[i, k] = 0.0
    }
    C[i, k] = C[i, k] + A[i, j] * ACCESS
  }
}
";

/// Compiled code does not check indices: what the arguments do not prove in range is refused
/// with its location and exit code 1 before any code runs (issue #13, defect 2), while the
/// interpreter runs what is in range.
#[test]
fn compiled_backends_refuse_accesses_they_cannot_prove() {
    let d = tmp("unproven");
    let mtx = d.join("wide.mtx");
    std::fs::write(&mtx, "%%MatrixMarket matrix coordinate real general\n3 50 3\n1 1 1.0\n2 2 2.0\n3 3 3.0\n").unwrap();
    let mat = format!("A={}", mtx.display());
    let cases = [
        // B's rows are indexed by column coordinates up to n = 50, but B has m = 3 rows.
        ("detach_m", "dense_fixed(m)", "B[j, k]", "index 0 of buffer `B` takes values in 0..=49 but the dimension has extent 3"),
        ("minus_one", "dense_fixed(n)", "B[j, k - 1]", "index 1 of buffer `B` takes values in -1..=6"),
        ("div_zero", "dense_fixed(n)", "B[j, k + 0 % 0]", "an integer divisor of this statement may be 0"),
    ];
    for (name, axis, access, message) in cases {
        let file = d.join(format!("{name}.sptir"));
        std::fs::write(&file, CSRMM_VARIANT.replace("BODY_J", axis).replace("ACCESS", access)).unwrap();
        let path = file.display().to_string();
        let o = sparsec(&["run", &path, "--matrix", &mat, "--feat", "8", "--backend", "mlir-cpu"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains(message) && err.contains(&format!("{name}.sptir:13:5")), "{name}: {err}");
    }
    // The interpreter checks as it goes: the in-range coordinates of this matrix run, and so
    // does the generated code with --checked, to the same numbers.
    let file = d.join("detach_m.sptir").display().to_string();
    let o = sparsec(&["run", &file, "--matrix", &mat, "--feat", "8"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let checked = sparsec(&["run", &file, "--matrix", &mat, "--feat", "8", "--backend", "mlir-cpu", "--checked"]);
    assert!(checked.status.success(), "{}", stderr(&checked));
    assert_eq!(stdout(&o).lines().next(), stdout(&checked).lines().next());
    // Out of range for real: the checked run reports the access instead of running it.
    let file = d.join("minus_one.sptir").display().to_string();
    for backend in ["interp", "mlir-cpu", "cubecl-wgpu"] {
        let o = sparsec(&["run", &file, "--matrix", &mat, "--feat", "8", "--backend", backend, "--checked"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{backend}: {err}");
        assert!(err.contains("checked run: index -1 is outside buffer `B` of 400 elements"), "{backend}: {err}");
    }
}

/// Writes a small `.npy` file with a raw header dictionary and data bytes.
fn raw_npy(path: &std::path::Path, dict: &str, data: &[u8]) {
    let mut header = dict.as_bytes().to_vec();
    header.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(data);
    std::fs::write(path, out).unwrap();
}

/// Fails with exit code 1, no panic, and a message containing every `want`.
fn fails_with(args: &[&str], want: &[&str]) {
    let o = sparsec(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    for w in want {
        assert!(err.contains(w), "{args:?}: missing `{w}` in: {err}");
    }
}

#[test]
fn run_refuses_untrusted_sizes_before_allocating() {
    let dir = tmp("sizes");
    let csrmm = "tests/workloads/csrmm.sptir";
    let mtx = |name: &str, size: &str| {
        let p = dir.join(name);
        std::fs::write(&p, format!("%%MatrixMarket matrix coordinate real general\n{size}\n1 1 1.0\n")).unwrap();
        format!("A={}", p.display())
    };
    // 3e9 rows (24 GB of row pointers) and 2^63 rows: beyond the i32 axes of csrmm.
    fails_with(&["run", csrmm, "--matrix", &mtx("rows.mtx", "3000000000 2 1"), "--feat", "2"], &["rows.mtx", "line 2", "rows = 3000000000", "i32"]);
    fails_with(&["run", csrmm, "--matrix", &mtx("rows63.mtx", "9223372036854775808 2 1"), "--feat", "2"], &["rows63.mtx", "line 2", "9223372036854775808"]);
    // 1e9 columns make B (J_detach × K) 4e9 elements.
    fails_with(
        &["run", csrmm, "--matrix", &mtx("cols.mtx", "2 1000000000 1"), "--feat", "4"],
        &["buffer `B` [J_detach, K] = (1000000000, 4) needs 4000000000 elements", "(--feat 4)"],
    );
    // A feature size of i32::MAX makes B 2 × 2147483647.
    let small = mtx("small.mtx", "2 2 1");
    fails_with(&["run", csrmm, "--matrix", &small, "--feat", "2147483647"], &["buffer `B`", "(2, 2147483647)", "--feat 2147483647"]);
    fails_with(&["run", csrmm, "--matrix", &small, "--scalar", "feat_size=2000000000"], &["buffer `B`", "--scalar feat_size=2000000000"]);
    // Values the scalar's dtype cannot hold.
    fails_with(&["run", csrmm, "--matrix", &small, "--feat", "4294967296"], &["--feat 4294967296", "scalar `feat_size` expects an integer that fits i32"]);
    fails_with(&["run", csrmm, "--matrix", &small, "--scalar", "feat_size=0.5"], &["scalar `feat_size` expects an integer (i32), found `0.5`"]);
    // A 20-byte .npy whose header claims 4 GB.
    let huge = dir.join("huge.npy");
    raw_npy(&huge, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 536870912), }", &[0; 20]);
    fails_with(
        &["run", csrmm, "--matrix", &small, "--feat", "536870912", "--input", &format!("B={}", huge.display())],
        &["huge.npy", "needs 4294967296 data bytes, the file has 20"],
    );
}

#[test]
fn run_checks_npy_inputs_against_their_buffer() {
    let dir = tmp("npyshape");
    let csrmm = "tests/workloads/csrmm.sptir";
    let a = dir.join("a.mtx");
    std::fs::write(&a, "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 1.0\n1 2 2.0\n2 2 3.0\n").unwrap();
    let mat = format!("A={}", a.display());
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    // B = [[1, 2, 3], [4, 5, 6]] in C order, and the same matrix in Fortran order.
    let c_order = dir.join("b_c.npy");
    raw_npy(&c_order, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", &f32s(&[1., 2., 3., 4., 5., 6.]));
    let f_order = dir.join("b_f.npy");
    raw_npy(&f_order, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", &f32s(&[1., 4., 2., 5., 3., 6.]));
    let run = |b: &std::path::Path| sparsec(&["run", csrmm, "--matrix", &mat, "--feat", "3", "--input", &format!("B={}", b.display())]);
    let (c, f) = (run(&c_order), run(&f_order));
    assert!(c.status.success() && f.status.success(), "{}{}", stderr(&c), stderr(&f));
    // C = A B = [[9, 12, 15], [12, 15, 18]]: sum 81.
    assert!(stdout(&c).contains("6 elements  sum +8.100000e1"), "{}", stdout(&c));
    assert_eq!(stdout(&c).lines().next(), stdout(&f).lines().next());
    // Without --feat the file's shape gives `feat_size`; a flag that disagrees is refused.
    let o = sparsec(&["run", csrmm, "--matrix", &mat, "--input", &format!("B={}", c_order.display())]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().next(), stdout(&c).lines().next());
    fails_with(&["run", csrmm, "--matrix", &mat, "--feat", "4", "--input", &format!("B={}", c_order.display())], &[
        &format!("{}: shape (2, 3) does not match buffer `B` [J_detach, K] = (2, 4)", c_order.display()),
    ]);
    // Transposed (feat, n), flat, and wrapping shapes are refused.
    let t = dir.join("b_t.npy");
    raw_npy(&t, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", &f32s(&[0.; 6]));
    fails_with(&["run", csrmm, "--matrix", &mat, "--feat", "3", "--input", &format!("B={}", t.display())], &[
        &format!("{}: shape (3, 2) does not match buffer `B` [J_detach, K] = (2, 3)", t.display()),
    ]);
    let flat = dir.join("b_flat.npy");
    raw_npy(&flat, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", &f32s(&[0.; 6]));
    fails_with(&["run", csrmm, "--matrix", &mat, "--feat", "3", "--input", &format!("B={}", flat.display())], &[
        "b_flat.npy: shape (6,) does not match buffer `B` [J_detach, K] = (2, 3)",
    ]);
    let wrap = dir.join("b_wrap.npy");
    raw_npy(&wrap, "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427388204, 4), }", &f32s(&[0.; 1200]));
    fails_with(&["run", csrmm, "--matrix", &mat, "--feat", "3", "--input", &format!("B={}", wrap.display())], &[
        "b_wrap.npy: shape (4611686018427388204, 4) has too many elements",
    ]);
}

#[test]
fn run_parses_scalars_by_dtype_and_takes_one_dimensional_files() {
    let dir = tmp("floatscalar");
    let prog = dir.join("scale.sptir");
    std::fs::write(
        &prog,
        "func scale(x: handle, y: handle, n: i32, alpha: f32) {\n  axis I = dense_fixed(n)\n  buffer X = match_sparse_buffer(x, [I], f32)\n  buffer Y = match_sparse_buffer(y, [I], f32)\n  sp_iter s([I], \"S\") as [i] {\n    Y[i] = X[i] * alpha\n  }\n}\n",
    )
    .unwrap();
    let x = dir.join("x.npy");
    sparsec::npy::write(&x, &sparsec::ir::data::Array::F32(vec![1.0, 2.0, 3.0]), &[3]).unwrap();
    let out = dir.join("out");
    let p = prog.to_str().unwrap();
    let o = sparsec(&["run", p, "--scalar", "n=3", "--scalar", "alpha=0.5", "--input", &format!("X={}", x.display()), "--output", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (y, shape) = sparsec::npy::read_shaped(&out.join("Y.npy")).unwrap();
    assert_eq!((y, shape), (sparsec::ir::data::Array::F32(vec![0.5, 1.0, 1.5]), vec![3]));
    fails_with(&["run", p, "--scalar", "n=3", "--scalar", "alpha=half"], &["--scalar alpha=half: scalar `alpha` expects a number (f32), found `half`"]);
}

#[test]
fn gpu_report_reads_ptxas_and_the_inner_loops() {
    let o = sparsec(&["gpu-report", "examples/csrmm.sptir"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("kernel csrmm_kernel0 (sm_90):") && out.contains("0 B spilled"), "{out}");
    // The default schedule keeps C in registers, 4 features per lane, and fuses the
    // multiply-adds: the nonzero's value and column and 4 elements of B per iteration, all
    // read-only, so through the non-coherent path.
    assert!(out.contains("global loads 6 (6 non-coherent), stores 0, atomics 0") && out.contains("fma 4, unfused float multiplies 0"), "{out}");
    let o = sparsec(&["gpu-report", "examples/csrmm.sptir", "--chip", "sm_xx"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("sm_xx") && !stderr(&o).contains("panicked"), "{}", stderr(&o));
}

/// A line's number after `key` (`DRAM 123 B` → 123 with key `DRAM `).
fn number_after(line: &str, key: &str) -> f64 {
    let rest = line.split(key).nth(1).unwrap_or_else(|| panic!("no `{key}` in {line}"));
    rest.split(|c: char| !(c.is_ascii_digit() || c == '.')).next().unwrap().parse().unwrap_or_else(|_| panic!("{line}"))
}

#[test]
fn gpu_report_estimates_kernels_and_the_gespmm_peer_on_a_matrix() {
    // 96 rows × 80 columns, row i holding 1 + i % 7 nonzeros (row 95 a long one of 70): every
    // column is used.
    let (m, n, feat) = (96usize, 80usize, 32usize);
    let mut entries = Vec::new();
    for i in 0..m {
        let len = if i == m - 1 { 70 } else { 1 + i % 7 };
        let mut cols: Vec<usize> = (0..len).map(|k| (i * 3 + k * 11) % n).collect();
        cols.sort_unstable();
        cols.dedup();
        entries.extend(cols.into_iter().map(|j| (i, j)));
    }
    for j in 0..n {
        entries.push((j % m, j));
    }
    entries.sort_unstable();
    entries.dedup();
    let nnz = entries.len();
    let dir = tmp("gpu-estimate");
    let path = dir.join("a.mtx");
    let mut text = format!("%%MatrixMarket matrix coordinate real general\n{m} {n} {nnz}\n");
    for (i, j) in &entries {
        text.push_str(&format!("{} {} {}\n", i + 1, j + 1, 0.5 + (i * 7 + j) as f64 % 3.0));
    }
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap();
    let o = sparsec(&["gpu-report", "tests/workloads/csrmm.sptir", "--auto", "gpu", "--matrix", p, "--feat", "32", "--peer", "gespmm"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    // Compulsory bytes: every element of A, its indices, indptr, B and C once.
    let compulsory = (4 * (2 * nnz + m + 1 + n * feat + m * feat)) as f64;
    let lines = |prefix: &str| out.lines().filter(|l| l.trim_start().starts_with(prefix)).map(str::to_string).collect::<Vec<_>>();
    let (heads, inputs) = (lines("estimate ("), lines("estimate inputs:"));
    assert_eq!((heads.len(), inputs.len()), (2, 2), "sparsec's kernel and the peer's:\n{out}");
    for (head, input) in heads.iter().zip(&inputs) {
        assert!(head.contains("H100") && head.contains(" us, bound by "), "{head}");
        let pct: f64 = head.split("% of the memory roofline").next().unwrap().rsplit(", ").next().unwrap().parse().unwrap();
        assert!(pct > 0.0 && pct <= 100.0, "{head}");
        let (footprint, dram, l2) = (number_after(input, "footprint "), number_after(input, "DRAM "), number_after(input, "L2 "));
        // The footprint fits in L2: DRAM reads it once; sectors round it up, never down.
        assert!(dram == footprint && dram >= compulsory && dram <= compulsory + 32.0 * 5.0 * 2.0, "{input} vs {compulsory}");
        assert!(l2 >= dram, "{input}");
    }
    assert!(out.contains("kernel csrmm_kernel0 (sm_90):") && out.contains("kernel gespmm_csr_f32 (sm_90):"), "{out}");
    assert!(out.contains("1024 B shared"), "the peer stages nonzeros in shared memory:\n{out}");
    let trace = lines("trace:");
    assert_eq!(trace.len(), 2, "{out}");
    let cmp = out.lines().find(|l| l.starts_with("estimate comparison on H100")).unwrap_or_else(|| panic!("{out}"));
    let ratio = number_after(cmp, " = ");
    assert!(ratio > 0.0 && ratio.is_finite(), "{cmp}");

    // Without --matrix, no estimate; the peer is for CSR SpMM only, and needs a matrix.
    let o = sparsec(&["gpu-report", "tests/workloads/csrmm.sptir"]);
    assert!(o.status.success() && !stdout(&o).contains("estimate"), "{}", stderr(&o));
    let o = sparsec(&["gpu-report", "tests/workloads/csr_element_wise.sptir", "--matrix", p, "--peer", "gespmm"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--peer gespmm models CSR SpMM") && !stderr(&o).contains("panicked"), "{}", stderr(&o));
    let o = sparsec(&["gpu-report", "tests/workloads/csrmm.sptir", "--peer", "gespmm"]);
    assert!(!o.status.success() && stderr(&o).contains("--matrix"), "{}", stderr(&o));
}

/// `sparsec einsum` writes a program that `run` takes like a hand-written one: SpMM from index
/// notation gives csrmm's numbers, with `n_k` taken from B.npy; a sparse add, which needs
/// co-iteration, is refused with exit code 1.
#[test]
fn einsum_writes_a_program_that_runs_like_the_corpus() {
    let dir = tmp("einsum");
    let a = small_matrix(&dir);
    let b = dir.join("b.npy");
    sparsec::npy::write(&b, &sparsec::ir::data::Array::F32((0..6).map(|x| x as f32).collect()), &[3, 2]).unwrap();
    let prog = dir.join("spmm.sptir");
    let o = sparsec(&["einsum", "C(i,k) = A(i,j) * B(j,k)", "--format", "A=csr", "--name", "spmm", "--output", prog.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = |p: &str| sparsec(&["run", p, "--matrix", &format!("A={}", a.display()), "--input", &format!("B={}", b.display())]);
    let (mine, corpus) = (run(prog.to_str().unwrap()), run("tests/workloads/csrmm.sptir"));
    assert!(mine.status.success() && corpus.status.success(), "{}{}", stderr(&mine), stderr(&corpus));
    let line = |o: &std::process::Output| stdout(o).lines().find(|l| l.starts_with("C ")).map(str::to_string);
    // C = A B = [[8, 11], [6, 9], [0, 4]]: sum 38.
    assert!(line(&mine).is_some_and(|l| l.contains("6 elements  sum +3.800000e1")), "{}", stdout(&mine));
    assert_eq!(line(&mine), line(&corpus));
    // Sparse add co-iterates into an assembled output; a union of an intersection is refused.
    let add = sparsec(&["einsum", "C(i,j) = A(i,j) + B(i,j)", "--format", "A=csr", "--format", "B=csr", "--format", "C=csr"]);
    assert!(add.status.success() && stdout(&add).contains("pattern = union(J_a, J_b)"), "{}{}", stdout(&add), stderr(&add));
    let mixed = ["einsum", "C(i,j) = A(i,j) * B(i,j) + E(i,j)", "--format", "A=csr", "--format", "B=csr", "--format", "C=csr", "--format", "E=csr"];
    fails_with(&mixed, &["mix unions and intersections"]);
    fails_with(&["einsum", "C(i) = A(i)", "--format", "A=bcsr"], &["unknown format `bcsr`", "csf or coo"]);
    let coo = sparsec(&["einsum", "y(i) = A(i,j) * x(j)", "--format", "A=coo"]);
    assert!(coo.status.success() && stdout(&coo).contains("sparse_fixed(n_i, nnz_a, indices_a_i, unique = false)"), "{}{}", stdout(&coo), stderr(&coo));
}

/// `sparsec bench` compiles once and times the runs: every step appears, the statistics are
/// ordered and count `--repeat` runs per round, on the interpreter and on mlir-cpu; misuse is
/// refused.
#[test]
fn bench_times_each_step_and_the_runs() {
    let dir = tmp("bench");
    let a = small_matrix(&dir);
    let mat = format!("A={}", a.display());
    for backend in ["interp", "mlir-cpu"] {
        let o = sparsec(&["bench", "tests/workloads/csrmm.sptir", "--matrix", &mat, "--feat", "8", "--backend", backend, "--repeat", "5", "--json"]);
        assert!(o.status.success(), "{backend}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
        assert_eq!(v["backend"], backend);
        // --repeat runs in each of the 3 default rounds.
        assert_eq!(v["runs_ms"].as_array().map(Vec::len), Some(15), "{v}");
        let (min, med, max) = (v["min_ms"].as_f64().unwrap(), v["median_ms"].as_f64().unwrap(), v["max_ms"].as_f64().unwrap());
        assert!(0.0 < min && min <= med && med <= max, "{v}");
        for step in ["parse + verify", "bind inputs", "schedule + lower", "check arguments", "compile"] {
            assert!(v["steps_ms"][step].as_f64().is_some_and(|t| t >= 0.0), "{step}: {v}");
        }
    }
    let o = sparsec(&["bench", "tests/workloads/csrmm.sptir", "--matrix", &mat, "--feat", "8", "--repeat", "2", "--rounds", "1"]);
    assert!(o.status.success() && stdout(&o).contains("bench csrmm on interp (Stage I): 1 rounds of 2 runs after 1 warm-up"), "{}", stdout(&o));
    assert!(stdout(&o).contains("  run                min "), "{}", stdout(&o));
    fails_with(&["bench", "tests/workloads/csrmm.sptir", "--matrix", &mat, "--feat", "8", "--repeat", "0"], &["--repeat and --rounds must be at least 1"]);
    fails_with(&["bench", "tests/workloads/csrmm.sptir", "--matrix", &mat, "--stage", "all"], &["bench takes one stage"]);
}

/// The `fill` and `height` of every `<rect>` in an SVG.
fn svg_rects(svg: &str) -> Vec<(String, f64)> {
    let attr = |r: &str, k: &str| r.split(&format!(" {k}=\"")).nth(1).and_then(|x| x.split('"').next()).map(str::to_string);
    svg.split("<rect").skip(1).filter_map(|r| Some((attr(r, "fill")?, attr(r, "height")?.parse().ok()?))).collect()
}

/// `sparsec bench` sweeps: two matrices for one buffer × two feature widths × two schedules
/// make eight cases, each in the table, the CSV and the JSON lines, compiled once and timed
/// in rounds; on mlir-cpu a run splits into upload, kernel and read-back; the plot is an SVG
/// with a bar per case in each schedule's colour, taller for slower kernels, and a legend.
/// `run` refuses a sweep; an unknown schedule is refused.
#[test]
fn bench_sweeps_matrices_widths_and_schedules() {
    let dir = tmp("benchsweep");
    let a = small_matrix(&dir);
    let b = dir.join("wide.mtx");
    let mut text = String::from("%%MatrixMarket matrix coordinate real general\n40 40 400\n");
    for i in 1..=40 {
        for j in 1..=10 {
            text.push_str(&format!("{i} {} {}.5\n", (i * 7 + j * 3) % 40 + 1, j));
        }
    }
    std::fs::write(&b, text).unwrap();
    let (ma, mb) = (format!("A={}", a.display()), format!("A={}", b.display()));
    let (csv, svg) = (dir.join("t.csv"), dir.join("t.svg"));
    let base = ["bench", "tests/workloads/csrmm.sptir", "--matrix", &ma, "--matrix", &mb, "--feat", "4", "--feat", "64", "--backend", "mlir-cpu"];
    let sweep = ["--auto", "cpu", "--sweep-schedule", "plain", "--repeat", "3", "--rounds", "2"];
    let files = ["--csv", csv.to_str().unwrap(), "--plot", svg.to_str().unwrap()];
    let o = sparsec(&[&base[..], &sweep[..], &files[..]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    for case in ["a feat 4 auto-cpu", "a feat 64 plain", "wide feat 4 plain", "wide feat 64 auto-cpu"] {
        assert!(table.lines().any(|l| l.starts_with(case)), "{case}: {table}");
    }
    let csv = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().skip(1).map(|l| l.split(',').collect()).collect();
    assert_eq!(csv.lines().next().unwrap(), "function,backend,data,schedule,min_ms,median_ms,max_ms,kernel_min_ms,upload_ms,kernel_ms,read_back_ms,symbolic_ms");
    assert_eq!(rows.len(), 8, "{csv}");
    let num = |r: &Vec<&str>, i: usize| r[i].parse::<f64>().unwrap();
    for r in &rows {
        assert_eq!((r[0], r[1]), ("csrmm", "mlir-cpu"));
        assert!(0.0 < num(r, 4) && num(r, 4) <= num(r, 5) && num(r, 5) <= num(r, 6), "{r:?}");
        // The kernel is part of the run; so are the other parts (no symbolic phase here).
        assert!(0.0 < num(r, 7) && num(r, 7) <= num(r, 4) && num(r, 7) <= num(r, 9), "{r:?}");
        assert!(num(r, 8) >= 0.0 && num(r, 10) >= 0.0 && num(r, 11) == 0.0, "{r:?}");
        assert!(num(r, 8) + num(r, 9) + num(r, 10) <= num(r, 6) * 1.01 + 1e-3, "{r:?}");
    }
    let schedules: Vec<&str> = rows.iter().map(|r| r[3]).collect();
    assert_eq!(schedules, ["auto-cpu", "plain"].repeat(4));
    // The chart: four bars per schedule (and its legend swatch), heights ordered as the times.
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("sparsec auto-cpu") && svg.contains("sparsec plain") && svg.contains("wide feat 64"), "{svg}");
    let rects = svg_rects(&svg);
    for (series, colour) in [("auto-cpu", "#1F77B4"), ("plain", "#FF7F0E")] {
        let bars: Vec<f64> = rects.iter().filter(|(f, _)| f == colour).map(|r| r.1).collect();
        assert_eq!(bars.len(), 5, "{series}: {rects:?}");
        let times: Vec<f64> = rows.iter().filter(|r| r[3] == series).map(|r| num(r, 7)).collect();
        for i in 0..4 {
            for j in 0..4 {
                if times[i] < times[j] {
                    assert!(bars[i] <= bars[j], "{series}: times {times:?}, bars {bars:?}");
                }
            }
        }
    }
    let o = sparsec(&[&base[..], &["--repeat", "1", "--rounds", "1", "--json"][..]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[3]["data"], "wide feat 64");
    fails_with(&["run", "tests/workloads/csrmm.sptir", "--matrix", &ma, "--matrix", &mb, "--feat", "4"], &["run takes one matrix per buffer and one --feat", "sparsec bench"]);
    fails_with(&["tune", "tests/workloads/csrmm.sptir", "--matrix", &ma, "--feat", "4", "--feat", "8", "--backend", "mlir-cpu"], &["tune takes one matrix per buffer"]);
    fails_with(&[&base[..], &["--sweep-schedule", "fastest"][..]].concat(), &["--sweep-schedule `fastest`"]);
}

/// `bench --compare` times a peer library on the program's own operands in the same rounds,
/// once its result and the program's both equal an f64 reference: scipy and MLIR's sparsifier
/// (in-process) for SpMM and SpMV, numpy for SDDMM. A program that only looks like SpMM (it doubles the product) is refused
/// by its numbers; a peer that does not compute the operation, and a program no peer
/// computes, are refused with the reason.
#[test]
fn bench_compares_with_peers_on_the_same_operands() {
    let dir = tmp("benchpeer");
    let a = small_matrix(&dir);
    let mat = format!("A={}", a.display());
    let quick = ["--repeat", "2", "--rounds", "2", "--json"];
    let cases = [
        ("tests/workloads/csrmm.sptir", "A", "scipy", Some("8")),
        ("examples/spmv.sptir", "A", "scipy", None),
        ("tests/workloads/sddmm.sptir", "C", "numpy", Some("8")),
        ("tests/workloads/csrmm.sptir", "A", "sparsifier", Some("8")),
        ("examples/spmv.sptir", "A", "sparsifier", None),
    ];
    for (file, buffer, peer, feat) in cases {
        let m = format!("{buffer}={}", a.display());
        let mut args = vec!["bench", file, "--matrix", &m, "--backend", "mlir-cpu", "--compare", peer];
        if let Some(f) = feat {
            args.extend(["--feat", f]);
        }
        args.extend(quick);
        let o = sparsec(&args);
        assert!(o.status.success(), "{file}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
        assert!(v["peers_min_ms"][peer].as_f64().is_some_and(|t| t > 0.0), "{file}: {v}");
    }
    let o = sparsec(&["bench", "tests/workloads/csrmm.sptir", "--matrix", &mat, "--feat", "8", "--compare", "scipy", "--repeat", "1", "--rounds", "1"]);
    assert!(o.status.success() && stdout(&o).contains("kernel / scipy = ") && stdout(&o).contains("equal an f64 reference"), "{}", stdout(&o));
    let doubled = dir.join("doubled.sptir");
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/workloads/csrmm.sptir")).unwrap().replace("A[i, j] * B[j, k]", "A[i, j] * B[j, k] * 2.0");
    std::fs::write(&doubled, text).unwrap();
    fails_with(&["bench", doubled.to_str().unwrap(), "--matrix", &mat, "--feat", "8", "--compare", "scipy"], &["--compare: `csrmm` (its output `C`) does not compute spmm on these data"]);
    fails_with(&["bench", "tests/workloads/csrmm.sptir", "--matrix", &mat, "--feat", "8", "--compare", "numpy"], &["--compare numpy: it does not compute spmm"]);
    fails_with(&["bench", "tests/workloads/sddmm.sptir", "--matrix", &format!("C={}", a.display()), "--feat", "8", "--compare", "sparsifier"], &["--compare sparsifier: it does not compute sddmm"]);
    fails_with(&["bench", "tests/workloads/csr_element_wise.sptir", "--matrix", &mat, "--compare", "scipy"], &["is not an operation a peer computes"]);
}

/// A decomposed program runs from the matrix alone: `examples/hyb.sptir` binds its buckets
/// from `--matrix A` (a 10-entry row is cut into chunks of at most 8) and gives csrmm's C.
#[test]
fn run_takes_a_decomposed_program_from_the_matrix_alone() {
    let dir = tmp("hybrun");
    let a = dir.join("a.mtx");
    let mut text = String::from("%%MatrixMarket matrix coordinate real general\n2 12 11\n");
    for j in 1..=10 {
        text.push_str(&format!("1 {j} {j}.0\n"));
    }
    text.push_str("2 12 -1.5\n");
    std::fs::write(&a, text).unwrap();
    let b = dir.join("b.npy");
    sparsec::npy::write(&b, &sparsec::ir::data::Array::F32((0..24).map(|x| x as f32 / 4.0).collect()), &[12, 2]).unwrap();
    let run = |p: &str| sparsec(&["run", p, "--matrix", &format!("A={}", a.display()), "--input", &format!("B={}", b.display())]);
    let (hyb, plain) = (run("examples/hyb.sptir"), run("tests/workloads/csrmm.sptir"));
    assert!(hyb.status.success() && plain.status.success(), "{}{}", stderr(&hyb), stderr(&plain));
    let line = |o: &std::process::Output| stdout(o).lines().find(|l| l.starts_with("C ")).map(str::to_string);
    assert!(line(&plain).is_some() && line(&hyb) == line(&plain), "{}\n{}", stdout(&hyb), stdout(&plain));
    // Only the program's output is reported, not the buckets its preprocess fills.
    assert!(!stdout(&hyb).contains("A_hyb_"), "{}", stdout(&hyb));
    for extra in [&["--backend", "mlir-cpu"][..], &["--backend", "cubecl-wgpu"][..]] {
        let o = sparsec(&[&["run", "examples/hyb.sptir", "--matrix", &format!("A={}", a.display()), "--input", &format!("B={}", b.display())][..], extra].concat());
        assert!(o.status.success(), "hyb {extra:?}: {}", stderr(&o));
        assert_same_summary(&o, &plain, "examples/hyb.sptir");
    }
    // Every other rule's example binds its pieces from the matrix too, also compiled; 2:4
    // takes a matrix with at most 2 entries in 4 columns of a row, and refuses this one.
    let a24 = dir.join("a24.mtx");
    std::fs::write(&a24, "%%MatrixMarket matrix coordinate real general\n2 12 7\n1 1 1.0\n1 2 2.0\n1 5 3.0\n1 7 4.0\n1 9 5.0\n1 10 6.0\n2 12 -1.5\n").unwrap();
    let plain24 = sparsec(&["run", "tests/workloads/csrmm.sptir", "--matrix", &format!("A={}", a24.display()), "--input", &format!("B={}", b.display())]);
    for prog in ["bsr", "ell", "group_coo", "block_group_coo", "sr_bcrs", "nm_2_4"] {
        let prog = format!("examples/{prog}.sptir");
        let (m, want) = if prog.contains("nm_2_4") { (&a24, &plain24) } else { (&a, &plain) };
        for extra in [&[][..], &["--backend", "mlir-cpu"][..], &["--backend", "mlir-cpu", "--auto", "cpu"][..], &["--backend", "cubecl-wgpu"][..]] {
            let mut args = vec!["run", &prog, "--matrix", &format!("A={}", m.display()), "--input", &format!("B={}", b.display())].into_iter().map(String::from).collect::<Vec<_>>();
            args.extend(extra.iter().map(|x| x.to_string()));
            let o = sparsec(&args.iter().map(String::as_str).collect::<Vec<_>>());
            assert!(o.status.success(), "{prog} {extra:?}: {}", stderr(&o));
            assert_same_summary(&o, want, &prog);
        }
    }
    fails_with(&["run", "examples/nm_2_4.sptir", "--matrix", &format!("A={}", a.display()), "--input", &format!("B={}", b.display())], &["nm_2_4 piece `A_nm_2_4` of `A`", "at most 2 entries in every 4 columns of a row"]);
}

/// A program written at Stage III runs on compiled backends only where its parallel and
/// bound loops are proven as the primitives prove theirs (the interpreter runs them in
/// order): a store every block makes to `Y[0]` is refused with the reason (so is any store
/// outside a block, which the proof cannot see into); a kernel of blocks runs.
#[test]
fn loops_written_bound_run_compiled_only_when_proven() {
    let dir = tmp("proven");
    let racy = dir.join("racy.sptir");
    std::fs::write(
        &racy,
        "func t(x: handle, y: handle, n: i32) stage III {\n  buffer X = match_buffer(x, [n], f32)\n  buffer Y = match_buffer(y, [1], f32)\n  \
         for i in blockIdx.x(n) {\n    Y[0] = Y[0] + 1.0\n    X[i] = X[i] * 2.0\n  }\n}\n",
    )
    .unwrap();
    let p = racy.to_str().unwrap();
    let o = sparsec(&["run", p, "--scalar", "n=5", "--stage", "3"]);
    assert!(o.status.success() && stdout(&o).contains("Y                     1 elements  sum +5.000000e0"), "{}", stdout(&o));
    fails_with(&["run", p, "--scalar", "n=5", "--backend", "mlir-cpu"], &[
        "racy.sptir:4:3: `t` cannot run on mlir-cpu: loop `i` cannot be bound: the store to `Y` lies outside any block driven by loop `i`",
    ]);
    let proven = dir.join("proven.sptir");
    std::fs::write(
        &proven,
        "func t(x: handle, n: i32) stage III {\n  buffer X = match_buffer(x, [n], f32)\n  for i in blockIdx.x(n) {\n    \
         block b(vi: spatial(n) = i) {\n      reads(X[vi])\n      writes(X[vi])\n      X[vi] = X[vi] * 2.0\n    }\n  }\n}\n",
    )
    .unwrap();
    let o = sparsec(&["run", proven.to_str().unwrap(), "--scalar", "n=5", "--backend", "mlir-cpu"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A 3 × 3 matrix with 4 entries, [[1, 0, 2], [0, 3, 0], [4, 0, 0]], as `dir/a.mtx`.
fn small_matrix(dir: &std::path::Path) -> PathBuf {
    let a = dir.join("a.mtx");
    std::fs::write(&a, "%%MatrixMarket matrix coordinate real general\n3 3 4\n1 1 1.0\n1 3 2.0\n2 2 3.0\n3 1 4.0\n").unwrap();
    a
}

/// Applies a unified diff (`--- `/`+++ ` headers, `@@ -a,b +c,d @@` hunks) to `old`.
fn apply_unified(old: &str, diff: &str) -> String {
    let old: Vec<&str> = old.lines().collect();
    let (mut out, mut at) = (Vec::new(), 0usize);
    for line in diff.lines().filter(|l| !l.starts_with("--- ") && !l.starts_with("+++ ")) {
        if let Some(h) = line.strip_prefix("@@ -") {
            let start: usize = h.split([',', ' ']).next().unwrap().parse().unwrap();
            // `-0,0` (an empty old side) starts before line 1.
            let start = start.max(1) - 1;
            out.extend_from_slice(&old[at..start]);
            at = start;
        } else if let Some(l) = line.strip_prefix('+') {
            out.push(l);
        } else if let Some(l) = line.strip_prefix('-') {
            assert_eq!(old[at], l, "the diff removes a line the old text does not have");
            at += 1;
        } else if let Some(l) = line.strip_prefix(' ') {
            assert_eq!(old[at], l, "a context line differs");
            out.push(l);
            at += 1;
        }
    }
    out.extend_from_slice(&old[at..]);
    out.iter().map(|l| format!("{l}\n")).collect()
}

/// `lower --diff` prints the first stage whole and each later one as a unified diff from the
/// one before: applying the diffs in turn gives exactly the stages `lower` prints alone; with
/// `--print-after all` each pass's dump is a diff from the previous dump.
#[test]
fn lower_diffs_each_stage_against_the_one_before() {
    let whole = |st: &str| stdout(&sparsec(&["lower", "tests/workloads/csrmm.sptir", "--auto", "cpu", "--stage", st]));
    let o = sparsec(&["lower", "tests/workloads/csrmm.sptir", "--auto", "cpu", "--stage", "all", "--diff"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let parts: Vec<&str> = text.split("# ===== ").skip(1).map(|p| p.split_once("=====\n").unwrap().1).collect();
    assert_eq!(parts.len(), 3, "{text}");
    assert_eq!(parts[0], whole("1"));
    assert!(parts[1].starts_with("--- Stage I: csrmm\n+++ Stage II: csrmm\n@@ "), "{}", parts[1]);
    let two = apply_unified(parts[0], parts[1]);
    assert_eq!(two, whole("2"));
    assert_eq!(apply_unified(&two, parts[2]), whole("3"));
    let o = sparsec(&["lower", "tests/workloads/csrmm.sptir", "--auto", "cpu", "--print-after", "all", "--diff"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let dumps: Vec<&str> = text.split("# ===== after ").skip(1).collect();
    assert!(dumps.len() > 3 && dumps[1..].iter().all(|d| d.contains("\n--- after ") || d.contains("# (unchanged)")), "{text}");
}

/// `lower --emit mlir` carries the `.sptir` source into MLIR locations: the operations of a
/// statement point at its line, the loops made for a sparse iteration at the iteration; the
/// multiply-add of csrmm's update points at the update's line.
#[test]
fn emitted_mlir_locates_operations_in_the_source() {
    let file = "tests/workloads/csrmm.sptir";
    let o = sparsec(&["lower", file, "--emit", "mlir"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    // `#locN = loc("file":line:col)` aliases, by name.
    let aliases: std::collections::HashMap<String, usize> = out
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once(" = loc(\"tests/workloads/csrmm.sptir\":")?;
            Some((name.to_string(), rest.split(':').next()?.parse().ok()?))
        })
        .collect();
    let source = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/workloads/csrmm.sptir")).unwrap();
    let line_of = |needle: &str| source.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let lines: std::collections::BTreeSet<usize> = aliases.values().copied().collect();
    assert_eq!(lines, [line_of("sp_iter csrmm"), line_of("C[i, k] = 0.0"), line_of("C[i, k] = C[i, k] +")].into(), "{out}");
    let fma_lines: Vec<usize> = out
        .lines()
        .filter(|l| l.contains("math.fma") && l.contains(" : f32 "))
        .filter_map(|l| aliases.get(l.rsplit_once("loc(").unwrap().1.trim_end_matches(')')).copied())
        .collect();
    assert!(!fma_lines.is_empty() && fma_lines.iter().all(|&l| l == line_of("C[i, k] = C[i, k] +")), "{fma_lines:?}\n{out}");
}

/// `lower --stage` takes a list: each stage named is printed once, in order, with a header.
#[test]
fn lower_prints_the_stages_named() {
    let o = sparsec(&["lower", "tests/workloads/csrmm.sptir", "--stage", "3", "--stage", "2", "--stage", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let headers: Vec<&str> = text.lines().filter(|l| l.starts_with("# =====")).collect();
    assert_eq!(headers, ["# ===== Stage II: csrmm =====", "# ===== Stage III: csrmm ====="]);
    let o = sparsec(&["lower", "tests/workloads/csrmm.sptir", "--stage", "2"]);
    assert!(o.status.success() && !stdout(&o).contains("=====") && stdout(&o).contains("stage II {"), "{}", stdout(&o));
}

/// `sparsec tune` measures distinct CPU schedules (on cubecl-wgpu, GPU schedules) and format
/// decompositions of a program on its data within the budget, ranks the default and the
/// fastest in a table, lists every format (measured with the default's numbers, or refused
/// with the reason), and writes the winner as a trace that `run --schedule` replays with the
/// interpreter's numbers; it refuses the interpreter, a schedule of the user's and a budget
/// that is not positive.
#[test]
fn tune_ranks_cpu_schedules_and_writes_a_replayable_winner() {
    let dir = tmp("tune");
    // Rows of 1 to 60 nonzeros: the long-row copies and the partition matter.
    let a = dir.join("a.mtx");
    let mut text = String::from("%%MatrixMarket matrix coordinate real general\n");
    let mut entries = Vec::new();
    for i in 0..60 {
        for j in 0..=i {
            entries.push(format!("{} {} {}.5", i + 1, (i * 7 + j * 13) % 64 + 1, (i + j) % 5));
        }
    }
    text.push_str(&format!("60 64 {}\n{}\n", entries.len(), entries.join("\n")));
    std::fs::write(&a, text).unwrap();
    let mat = format!("A={}", a.display());
    let best = dir.join("best.json");
    let best_s = best.display().to_string();
    let o = sparsec(&["tune", "examples/spmv.sptir", "--matrix", &mat, "--backend", "mlir-cpu", "--budget", "3", "--repeat", "2", "--write", &best_s]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("tune spmv on mlir-cpu: "), "{out}");
    // The ranking: the lines after its header, up to the formats.
    let ranking = out.split("parameters (what differs from the default CPU schedule)\n").nth(1).unwrap_or_else(|| panic!("{out}"));
    let rows: Vec<&str> = ranking.lines().take_while(|l| !l.starts_with("formats (")).filter(|l| l.trim_start().chars().next().is_some_and(|c| c.is_ascii_digit())).collect();
    assert!(rows.len() >= 2 && rows.iter().any(|l| l.ends_with("  default")), "{out}");
    // Ranked by time, the default at 1.000 of itself.
    let times: Vec<f64> = rows.iter().map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{out}");
    let default_row = rows.iter().find(|l| l.ends_with("  default")).unwrap();
    assert_eq!(default_row.split_whitespace().nth(2), Some("1.000"), "{out}");
    // The winner replays, and gives the interpreter's numbers: a schedule of the program, or
    // a format decomposition (rcm can win on noise), written as a program beside the trace.
    let (o1, o2) = (dir.join("tuned"), dir.join("interp"));
    let program = if out.contains("wrote the fastest, format ") { best.with_extension("sptir") } else { PathBuf::from("examples/spmv.sptir") };
    let tuned = sparsec(&["run", program.to_str().unwrap(), "--matrix", &mat, "--backend", "mlir-cpu", "--schedule", &best_s, "--output", o1.to_str().unwrap()]);
    let interp = sparsec(&["run", "examples/spmv.sptir", "--matrix", &mat, "--output", o2.to_str().unwrap()]);
    assert!(tuned.status.success() && interp.status.success(), "{}{}", stderr(&tuned), stderr(&interp));
    let read = |d: &PathBuf| match sparsec::npy::read(&d.join("Y.npy")).unwrap() {
        sparsec::ir::data::Array::F32(v) => v,
        other => panic!("{other:?}"),
    };
    let (y1, y2) = (read(&o1), read(&o2));
    assert_eq!(y1.len(), 60);
    for (i, (p, q)) in y1.iter().zip(&y2).enumerate() {
        assert!((p - q).abs() <= 1e-5 * q.abs().max(1.0), "Y[{i}]: {p} tuned, {q} interpreted");
    }
    // csrmm: every format decomposition of A is measured (its kernel, the conversion done
    // once) with the same numbers as the default, or refused with the reason; none differs.
    let o = sparsec(&["tune", "tests/workloads/csrmm.sptir", "--matrix", &mat, "--feat", "8", "--backend", "mlir-cpu", "--budget", "60", "--repeat", "2", "--max-slots", "1000"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let section = out.split("formats (").nth(1).unwrap_or_else(|| panic!("{out}"));
    for f in ["bsr_2", "bsr_4", "bsr_8", "ell_64", "hyb_1_32", "group_coo_8", "sr_bcrs_4_8", "rcm"] {
        let line = section.lines().find(|l| l.contains(&format!("format {f}"))).unwrap_or_else(|| panic!("{f}: {out}"));
        assert!(!line.contains("differs"), "{line}");
        let first = line.split_whitespace().next().unwrap();
        assert!(first == "refused" || first.parse::<f64>().is_ok_and(|t| t > 0.0), "{line}");
    }
    assert!(section.lines().filter(|l| l.contains("format ") && !l.contains("refused")).count() >= 3, "{out}");
    // The cost model prunes, before compiling, every format storing more value slots per
    // nonzero than `--max-slots` (BSR's blocks hold zeros on this matrix), and says how many.
    let o = sparsec(&["tune", "tests/workloads/csrmm.sptir", "--matrix", &mat, "--feat", "8", "--backend", "mlir-cpu", "--budget", "60", "--repeat", "1", "--max-slots", "1.5"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let pruned: Vec<&str> = out.lines().filter(|l| l.trim_start().starts_with("pruned")).collect();
    assert!(pruned.iter().any(|l| l.contains("format bsr_8")), "{out}");
    for l in &pruned {
        let r: f64 = l.split("stores ").nth(1).and_then(|t| t.split_whitespace().next()).and_then(|t| t.parse().ok()).unwrap_or_else(|| panic!("{l}"));
        assert!(r > 1.5 && l.ends_with("above --max-slots 1.5"), "{l}");
    }
    fails_with(&["tune", "tests/workloads/csrmm.sptir", "--matrix", &mat, "--feat", "8", "--backend", "mlir-cpu", "--max-slots", "0.5"], &["--max-slots must be a number of at least 1"]);
    let o = sparsec(&["tune", "tests/workloads/csrmm.sptir", "--matrix", &mat, "--feat", "8", "--backend", "mlir-cpu", "--budget", "2", "--repeat", "1", "--schedules-only"]);
    assert!(o.status.success() && !stdout(&o).contains("formats ("), "{}{}", stdout(&o), stderr(&o));
    fails_with(&["tune", "examples/spmv.sptir", "--matrix", &mat], &["tune measures generated code"]);
    // On a GPU backend the GPU schedule's parameters are searched; the winner replays there
    // with the interpreter's numbers.
    let gbest = dir.join("gpu_best.json");
    let o = sparsec(&["tune", "tests/workloads/csrmm.sptir", "--matrix", &mat, "--feat", "8", "--backend", "cubecl-wgpu", "--budget", "10", "--repeat", "1", "--schedules-only", "--write", gbest.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("tune csrmm on cubecl-wgpu: "), "{out}");
    let ranking = out.split("parameters (what differs from the default GPU schedule)\n").nth(1).unwrap_or_else(|| panic!("{out}"));
    let rows: Vec<&str> = ranking.lines().filter(|l| l.trim_start().chars().next().is_some_and(|c| c.is_ascii_digit())).collect();
    assert!(rows.len() >= 2 && rows.iter().any(|l| l.ends_with("  default")), "{out}");
    assert!(rows.iter().any(|l| ["coarsen", "unroll", "rows_per_block", "walks_on_blocks"].iter().any(|p| l.contains(p))), "{out}");
    let (g1, g2) = (dir.join("gpu_tuned"), dir.join("gpu_interp"));
    let tuned = sparsec(&["run", "tests/workloads/csrmm.sptir", "--matrix", &mat, "--feat", "8", "--backend", "cubecl-wgpu", "--schedule", gbest.to_str().unwrap(), "--output", g1.to_str().unwrap()]);
    let interp = sparsec(&["run", "tests/workloads/csrmm.sptir", "--matrix", &mat, "--feat", "8", "--output", g2.to_str().unwrap()]);
    assert!(tuned.status.success() && interp.status.success(), "{}{}", stderr(&tuned), stderr(&interp));
    let read_c = |d: &PathBuf| match sparsec::npy::read(&d.join("C.npy")).unwrap() {
        sparsec::ir::data::Array::F32(v) => v,
        other => panic!("{other:?}"),
    };
    let (c1, c2) = (read_c(&g1), read_c(&g2));
    assert_eq!(c1.len(), 60 * 8);
    for (i, (p, q)) in c1.iter().zip(&c2).enumerate() {
        assert!((p - q).abs() <= 1e-4 * q.abs().max(1.0), "C[{i}]: {p} tuned on wgpu, {q} interpreted");
    }
    // `--backend gpu-report` ranks GPU candidates by the model's estimate (each one's numbers
    // checked by the interpreter), deterministically, and writes a winner that replays.
    let ebest = dir.join("estimate_best.json");
    let estimate = |write: &str| sparsec(&["tune", "tests/workloads/csrmm.sptir", "--matrix", &mat, "--feat", "8", "--backend", "gpu-report", "--budget", "15", "--write", write]);
    let o = estimate(ebest.to_str().unwrap());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("tune csrmm on gpu-report: ") && out.contains("estimated for an H100 by gpu-report's model"), "{out}");
    let ranking = out.split("parameters (what differs from the default GPU schedule)\n").nth(1).unwrap_or_else(|| panic!("{out}"));
    let rows: Vec<&str> = ranking.lines().take_while(|l| !l.starts_with("formats (")).filter(|l| l.trim_start().chars().next().is_some_and(|c| c.is_ascii_digit())).collect();
    let est: Vec<f64> = rows.iter().map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap()).collect();
    assert!(rows.len() >= 2 && est.windows(2).all(|w| w[0] <= w[1]) && est.iter().all(|&t| t > 0.0), "{out}");
    let winner = rows[0].split_whitespace().skip(3).collect::<Vec<_>>().join(" ");
    let again = stdout(&estimate(dir.join("estimate_again.json").to_str().unwrap()));
    let rows2: Vec<&str> = again.lines().filter(|l| l.trim_start().starts_with("1 ")).collect();
    assert!(rows2.first().is_some_and(|l| l.ends_with(&winner)), "the estimate ranks the same winner twice: {out}\n{again}");
    let e1 = dir.join("estimate_run");
    let program = if winner.starts_with("format ") { ebest.with_extension("sptir") } else { PathBuf::from("tests/workloads/csrmm.sptir") };
    let replayed = sparsec(&["run", program.to_str().unwrap(), "--matrix", &mat, "--feat", "8", "--backend", "interp", "--schedule", ebest.to_str().unwrap(), "--output", e1.to_str().unwrap()]);
    assert!(replayed.status.success(), "{}", stderr(&replayed));
    let c3 = read_c(&e1);
    for (i, (p, q)) in c3.iter().zip(&c2).enumerate() {
        assert!((p - q).abs() <= 1e-4 * q.abs().max(1.0), "C[{i}]: {p} with the estimated winner, {q} interpreted");
    }
    fails_with(&["run", "tests/workloads/csrmm.sptir", "--matrix", &mat, "--feat", "8", "--backend", "gpu-report"], &["`--backend gpu-report` runs nothing"]);
    fails_with(&["tune", "examples/spmv.sptir", "--matrix", &mat, "--backend", "mlir-cpu", "--auto", "cpu"], &["tune chooses the schedule"]);
    fails_with(&["tune", "examples/spmv.sptir", "--matrix", &mat, "--backend", "mlir-cpu", "--budget", "0"], &["--budget must be a positive number"]);
}

/// A program's own axes say how `--matrix` and `--tensor` lay a file out: SpMV with A in
/// DCSR (a root sparse axis), in CSC (`modes = [1, 0]`) and in COO (`unique = false`) gives
/// CSR SpMV's y on the same matrix, on the interpreter and on mlir-cpu with the default
/// schedule; TTV reads a CSF and a COO tensor from a `.tns` file; malformed or mismatched files are refused with the file, the
/// line and the reason.
#[test]
fn run_lays_files_out_in_the_programs_own_format() {
    let dir = tmp("formats");
    let a = dir.join("a.mtx");
    std::fs::write(&a, "%%MatrixMarket matrix coordinate real general\n4 3 5\n1 1 1.0\n1 3 2.0\n3 2 3.0\n4 1 -1.5\n4 3 0.25\n").unwrap();
    let mat = format!("A={}", a.display());
    let csr = sparsec(&["run", "examples/spmv.sptir", "--matrix", &mat, "--seed", "3"]);
    assert!(csr.status.success(), "{}", stderr(&csr));
    for prog in ["examples/formats/dcsr_spmv.sptir", "examples/formats/csc_spmv.sptir", "examples/formats/coo_spmv.sptir"] {
        for extra in [&[][..], &["--backend", "mlir-cpu", "--auto", "cpu"][..]] {
            let mut args = vec!["run", prog, "--matrix", &mat, "--seed", "3"];
            args.extend_from_slice(extra);
            let o = sparsec(&args);
            assert!(o.status.success(), "{prog} {extra:?}: {}", stderr(&o));
            assert_same_summary(&o, &csr, prog);
        }
    }
    let t = dir.join("t.tns");
    std::fs::write(&t, "# i j k value\n1 1 1 1.0\n1 1 3 2.0\n2 3 2 -1.0\n2 3 2 0.5\n").unwrap();
    let o = sparsec(&["run", "examples/formats/csf_ttv.sptir", "--tensor", &format!("A={}", t.display())]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("Y                     6 elements"), "{}", stdout(&o));
    // The same tensor in COO (a root axis repeating coordinates, singletons below it).
    let coo = sparsec(&["run", "examples/formats/coo_ttv.sptir", "--tensor", &format!("A={}", t.display())]);
    assert!(coo.status.success(), "{}", stderr(&coo));
    assert_same_summary(&coo, &o, "coo_ttv");
    // Rows given out of order to a sorted COO axis are refused before compiled code runs.
    let rows = dir.join("rows.npy");
    sparsec::npy::write(&rows, &sparsec::ir::data::Array::I32(vec![1, 0]), &[2]).unwrap();
    let cols = dir.join("cols.npy");
    sparsec::npy::write(&cols, &sparsec::ir::data::Array::I32(vec![0, 0]), &[2]).unwrap();
    let vals = dir.join("vals.npy");
    sparsec::npy::write(&vals, &sparsec::ir::data::Array::F32(vec![1.0, 2.0]), &[2]).unwrap();
    let input = |n: &str, p: &PathBuf| format!("{n}={}", p.display());
    fails_with(
        &["run", "examples/formats/coo_spmv.sptir", "--backend", "mlir-cpu", "--input", &input("rows", &rows), "--input", &input("cols", &cols), "--input", &input("a", &vals), "--scalar", "m=2", "--scalar", "n=1", "--scalar", "nnz=2"],
        &["coordinates of root axis `I` are not sorted (1 then 0 at position 1)"],
    );
    let bad = dir.join("bad.tns");
    std::fs::write(&bad, "1 1 1 1.0\n1 0 2 2.0\n").unwrap();
    fails_with(
        &["run", "examples/formats/csf_ttv.sptir", "--tensor", &format!("A={}", bad.display())],
        &["bad.tns: line 2: coordinate 2 is 0; `.tns` coordinates start at 1"],
    );
    fails_with(&["run", "examples/formats/csf_ttv.sptir", "--matrix", &mat], &["a.mtx", "buffer `A` has 3 axes, expected 2 (one per mode of the tensor)"]);
}

/// Co-iteration from files: `(A + B) x` over the union of two patterns (read from two
/// `--matrix` files) gives SpMV's y on the matrix A + B, on the interpreter and on mlir-cpu
/// with the default schedule; two files of different shapes are refused.
/// `text` written to `dir/name`.
fn write_in(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A fresh folder `tmp(name)` holding two 4×3 Matrix Market files whose rows share some
/// coordinates and not others: (folder, a.mtx, b.mtx).
fn two_matrices(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let dir = tmp(name);
    let head = "%%MatrixMarket matrix coordinate real general\n";
    let a = write_in(&dir, "a.mtx", &format!("{head}4 3 4\n1 1 1.0\n1 3 2.0\n3 2 3.0\n4 3 0.25\n"));
    let b = write_in(&dir, "b.mtx", &format!("{head}4 3 4\n1 3 -1.0\n2 2 4.0\n4 1 -1.5\n4 3 0.5\n"));
    (dir, a, b)
}

#[test]
fn run_assembles_sparse_outputs() {
    let (dir, a, b) = two_matrices("assemble");
    let write = |name: &str, text: &str| write_in(&dir, name, text);
    let arg = |k: &str, p: &PathBuf| format!("{k}={}", p.display());
    // Row 2 of A + B holds (1, 1) only from B, row 3 nothing; A .* B keeps (0, 2) and (3, 2).
    let sum = "4 3 6\n1 1 1\n1 3 1\n2 2 4\n3 2 3\n4 1 -1.5\n4 3 0.75\n";
    let product = "4 3 2\n1 3 -2\n4 3 0.125\n";
    for (program, want) in [("sparse_add", sum), ("sparse_mul", product)] {
        for extra in [&[][..], &["--stage", "3"][..], &["--backend", "mlir-cpu"][..], &["--backend", "mlir-cpu", "--auto", "cpu"][..]] {
            let out = dir.join(format!("{program}-{}", extra.len()));
            let file = format!("examples/formats/{program}.sptir");
            let (ma, mb, o) = (arg("A", &a), arg("B", &b), out.display().to_string());
            let mut args = vec!["run", &file, "--matrix", &ma, "--matrix", &mb, "--output", &o];
            args.extend_from_slice(extra);
            let r = sparsec(&args);
            assert!(r.status.success(), "{program} {extra:?}: {}", stderr(&r));
            let mtx = std::fs::read_to_string(out.join("C.mtx")).unwrap();
            assert!(mtx.ends_with(want), "{program} {extra:?}: {mtx}");
            assert!(out.join("c_indptr.npy").exists() && out.join("c_indices.npy").exists(), "{program} {extra:?}");
        }
    }
    // SpGEMM: C = S·S, its pattern the product's (row 0 picks rows 0 and 2, row 2 row 1).
    let sq = write("s.mtx", "%%MatrixMarket matrix coordinate real general\n3 3 4\n1 1 1.0\n1 3 2.0\n2 2 3.0\n3 2 5.0\n");
    for extra in [&[][..], &["--backend", "mlir-cpu"][..]] {
        let out = dir.join(format!("spgemm-{}", extra.len()));
        let (ms, o) = (arg("A", &sq), out.display().to_string());
        let mb = arg("B", &sq);
        let mut args = vec!["run", "examples/formats/spgemm.sptir", "--matrix", &ms, "--matrix", &mb, "--output", &o];
        args.extend_from_slice(extra);
        let r = sparsec(&args);
        assert!(r.status.success(), "spgemm {extra:?}: {}", stderr(&r));
        let mtx = std::fs::read_to_string(out.join("C.mtx")).unwrap();
        assert!(mtx.ends_with("3 3 5\n1 1 1\n1 2 10\n1 3 2\n2 2 9\n3 2 15\n"), "spgemm {extra:?}: {mtx}");
    }
    // A row pointer that is not the pattern's is refused, never used.
    let bad = write("bad.npy", "");
    sparsec::npy::write(&bad, &sparsec::ir::data::Array::I32(vec![0, 1, 2, 3, 4]), &[5]).unwrap();
    let o = sparsec(&["run", "examples/formats/sparse_add.sptir", "--matrix", &arg("A", &a), "--matrix", &arg("B", &b), "--input", &arg("c_indptr", &bad)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("assembling axis `JC`: the given row pointer `c_indptr` is not its pattern's"), "{}", stderr(&o));
}

#[test]
fn run_co_iterates_two_matrices() {
    let (dir, a, b) = two_matrices("coiter");
    let write = |name: &str, text: &str| write_in(&dir, name, text);
    let head = "%%MatrixMarket matrix coordinate real general\n";
    let sum = write("sum.mtx", &format!("{head}4 3 6\n1 1 1.0\n1 3 1.0\n2 2 4.0\n3 2 3.0\n4 1 -1.5\n4 3 0.75\n"));
    let wide = write("wide.mtx", &format!("{head}4 5 1\n1 5 1.0\n"));
    let arg = |k: &str, p: &PathBuf| format!("{k}={}", p.display());
    let want = sparsec(&["run", "examples/spmv.sptir", "--matrix", &arg("A", &sum), "--seed", "3"]);
    assert!(want.status.success(), "{}", stderr(&want));
    for extra in [&[][..], &["--backend", "mlir-cpu", "--auto", "cpu"][..]] {
        let mut args = vec!["run", "examples/formats/coiter_add_spmv.sptir", "--seed", "3"];
        let (ma, mb) = (arg("A", &a), arg("B", &b));
        args.extend_from_slice(&["--matrix", &ma, "--matrix", &mb]);
        args.extend_from_slice(extra);
        let o = sparsec(&args);
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        assert_same_summary(&o, &want, "coiter_add_spmv");
    }
    let o = sparsec(&["run", "examples/formats/coiter_add_spmv.sptir", "--matrix", &arg("A", &a), "--matrix", &arg("B", &wide)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("wide.mtx: scalar `n` is already bound to 3, cannot bind 5"), "{}", stderr(&o));
}
