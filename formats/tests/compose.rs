//! Composable-format conversions: exact read-back on random and shared matrices, the
//! documented layouts on tiny matrices, and error cases.

use proptest::prelude::*;
use sparsec_formats::compose::{
    check_canonical, condense, insum_group_size, max_row_length, pad_rows_to_multiple, prune_to_nm,
    row_degree_histogram, to_ell_k, BlockGroupCoo, GroupCoo, Hyb, NmMatrix, PaddedBsr, ReorderedRows, RowSegments,
};
use sparsec_formats::{
    gen, mtx, shared_matrices, ComposeError, Csr, Index, ValidateOptions, Value,
};

/// Parameters for one run of every conversion.
#[derive(Clone, Debug)]
struct Params {
    bsr_blocks: Vec<usize>,
    col_parts: usize,
    bucket_log: u32,
    t: usize,
    g: usize,
    group: Option<usize>,
    nm: (usize, usize),
    dense_ok: bool,
}

fn nonzeros<I: Index, V: Value>(a: &Csr<I, V>) -> Csr<I, V> {
    let mut c = a.clone();
    c.eliminate_zeros();
    c
}

/// Runs every conversion on `a` and checks the read-back.
fn check_all<I: Index, V: Value>(a: &Csr<I, V>, p: &Params, name: &str) {
    let nz = nonzeros(a);
    // 1. padded BSR
    for &b in &p.bsr_blocks {
        let pb = PaddedBsr::from_csr(a, b).unwrap();
        let (pr, pc) = pb.padded_shape();
        assert!(
            pr % b == 0 && pc % b == 0 && pr >= a.rows() && pc >= a.cols(),
            "{name}"
        );
        assert!(pr < a.rows() + b && pc < a.cols() + b, "{name}");
        assert_eq!(pb.to_csr().unwrap(), nz, "{name}: bsr {b}");
        // 5b. BlockGroupCOO
        let bg = BlockGroupCoo::from_csr(a, b).unwrap();
        assert_eq!(bg.to_csr().unwrap(), nz, "{name}: block group coo {b}");
    }
    // 2. ELL(k) at the max row length, and row padding
    let k = max_row_length(a);
    let ell = to_ell_k(a, k).unwrap();
    assert_eq!(&ell.to_csr().unwrap(), a, "{name}: ell");
    if k > 0 {
        assert!(matches!(
            to_ell_k(a, k - 1),
            Err(ComposeError::RowTooLong { len, .. }) if len == k
        ));
    }
    for m in [1, 2, 3, 4, 32] {
        let pr = pad_rows_to_multiple(a, m).unwrap();
        assert!(pr.csr().row_lengths().iter().all(|l| l % m == 0), "{name}");
        assert!(pr.csr().has_sorted_indices(), "{name}");
        assert_eq!(&pr.to_csr(), a, "{name}: pad rows {m}");
    }
    // 3. hyb
    let hyb = Hyb::from_csr(a, p.col_parts, p.bucket_log).unwrap();
    assert_eq!(hyb.num_col_parts(), p.col_parts);
    check_hyb_layout(a, &hyb, name);
    assert_eq!(&hyb.to_csr(), a, "{name}: hyb");
    // 4. SR-BCRS
    let sr = condense(a, p.t, p.g).unwrap();
    assert_eq!(sr.to_csr(), nz, "{name}: sr-bcrs {} {}", p.t, p.g);
    // 5. GroupCOO
    let gc = match p.group {
        Some(gs) => GroupCoo::with_group_size(a, gs).unwrap(),
        None => GroupCoo::from_csr(a).unwrap(),
    };
    assert_eq!(&gc.to_csr(), a, "{name}: group coo");
    assert!(gc.group_size().is_power_of_two() || p.group.is_some());
    // 6. N:M
    if p.dense_ok {
        let (n, m) = p.nm;
        let pruned = prune_to_nm(a, n, m).unwrap();
        let nm = NmMatrix::from_csr(&pruned, n, m).unwrap();
        assert_eq!(nm.values().len(), a.rows() * a.cols().div_ceil(m) * n);
        assert_eq!(nm.to_csr::<I>().unwrap(), nonzeros(&pruned), "{name}: nm");
        assert_eq!(
            nm.to_dense(),
            pruned.to_dense().unwrap(),
            "{name}: nm dense"
        );
        let from_dense =
            NmMatrix::from_dense(a.rows(), a.cols(), &pruned.to_dense().unwrap(), n, m).unwrap();
        assert_eq!(from_dense, nm, "{name}: nm from dense");
        // The unpruned matrix converts iff no group exceeds n.
        let violates = (0..a.rows()).any(|i| {
            let (c, v) = a.row(i).unwrap();
            let mut cnt = std::collections::HashMap::new();
            for (c, v) in c.iter().zip(v) {
                if !v.is_zero() {
                    *cnt.entry(c.to_usize().unwrap() / m).or_insert(0usize) += 1;
                }
            }
            cnt.values().any(|&x| x > n)
        });
        match NmMatrix::from_csr(a, n, m) {
            Ok(x) => {
                assert!(!violates, "{name}");
                assert_eq!(x.to_csr::<I>().unwrap(), nz);
            }
            Err(ComposeError::NmViolation { count, .. }) => {
                assert!(violates && count > n, "{name}")
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
}

/// Checks the `column_part_hyb` invariants of every bucket.
fn check_hyb_layout<I: Index, V: Value>(a: &Csr<I, V>, hyb: &Hyb<I, V>, name: &str) {
    let widths = hyb.bucket_widths();
    let max_w = *widths.last().unwrap();
    let ps = hyb.part_size();
    for (pi, part) in hyb.parts().iter().enumerate() {
        assert_eq!(part.len(), widths.len());
        for (j, b) in part.iter().enumerate() {
            assert_eq!(b.width(), widths[j]);
            assert_eq!(b.col_indices().len(), b.len() * b.width());
            assert_eq!(b.values().len(), b.len() * b.width());
            for r in 0..b.len() {
                let c = b.counts()[r].to_usize().unwrap();
                let row = b.row_indices()[r].to_usize().unwrap();
                assert!(c >= 1 && c <= b.width(), "{name}");
                let cols = &b.col_indices()[r * b.width()..(r + 1) * b.width()];
                // Columns inside partition pi; padding repeats the last valid column.
                for x in cols {
                    assert_eq!(x.to_usize().unwrap() / ps, pi, "{name}");
                }
                assert!(cols[c..].iter().all(|x| *x == cols[c - 1]), "{name}");
                assert!(b.values()[r * b.width() + c..(r + 1) * b.width()]
                    .iter()
                    .all(|v| v.is_zero()));
                // Degree of the row in this partition decides the bucket.
                let (rc, _) = a.row(row).unwrap();
                let d = rc
                    .iter()
                    .filter(|x| x.to_usize().unwrap() / ps == pi)
                    .count();
                if d <= max_w {
                    assert_eq!(b.width(), d.next_power_of_two(), "{name}: row {row}");
                    assert_eq!(c, d);
                } else {
                    assert_eq!(b.width(), max_w, "{name}: split row {row}");
                }
            }
        }
    }
}

fn build<I: Index>(kind: u8, rows: usize, cols: usize, seed: u64, nnz: usize) -> Csr<I, f64> {
    match kind % 6 {
        0 => gen::uniform(rows, cols, nnz % (rows * cols + 1), seed).unwrap(),
        1 => gen::with_empty_rows(rows, cols, seed).unwrap(),
        2 => gen::single_full_row(rows.max(1), cols, seed as usize % rows.max(1), seed).unwrap(),
        3 => gen::one_by_one(0.5),
        4 => gen::block_sparse(rows, cols, 3, 0.4, seed).unwrap(),
        _ => gen::rmat((rows % 6) as u32, nnz, [0.57, 0.19, 0.19, 0.05], seed).unwrap(),
    }
}

fn params() -> impl Strategy<Value = Params> {
    (
        proptest::sample::subsequence(vec![1usize, 2, 3, 4, 8, 16, 32], 1..3),
        1usize..5,
        0u32..6,
        1usize..9,
        1usize..9,
        proptest::option::of(1usize..6),
        proptest::sample::select(vec![
            (2usize, 4usize),
            (1, 2),
            (1, 4),
            (4, 8),
            (2, 8),
            (3, 3),
        ]),
    )
        .prop_map(
            |(bsr_blocks, col_parts, bucket_log, t, g, group, nm)| Params {
                bsr_blocks,
                col_parts,
                bucket_log,
                t,
                g,
                group,
                nm,
                dense_ok: true,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Every conversion reads back the random input exactly, with `i32` and `i64` indices.
    #[test]
    fn random_matrices_read_back(
        kind in 0u8..6,
        rows in 0usize..40,
        cols in 0usize..70,
        seed in any::<u64>(),
        nnz in 0usize..400,
        p in params(),
    ) {
        let a32 = build::<i32>(kind, rows, cols, seed, nnz);
        prop_assert!(a32.has_canonical_format());
        check_all(&a32, &p, &format!("i32 kind {kind}"));
        let a64 = build::<i64>(kind, rows, cols, seed, nnz);
        check_all(&a64, &p, &format!("i64 kind {kind}"));
        let f32m = a32.cast_values::<f32>();
        check_all(&f32m, &p, &format!("f32 kind {kind}"));
    }
}

#[test]
fn shared_matrices_read_back() {
    let list = shared_matrices();
    for (name, path) in list {
        let a: Csr<i32, f32> = mtx::read_mtx_path(&path).unwrap();
        let big = a.nnz() > 50_000;
        let p = Params {
            bsr_blocks: if big {
                vec![2, 4]
            } else {
                vec![2, 4, 8, 16, 32]
            },
            col_parts: if big { 1 } else { 2 },
            bucket_log: if big { 9 } else { 5 },
            t: 8,
            g: 8,
            group: None,
            nm: (2, 4),
            dense_ok: a.rows() * a.cols() <= 20_000_000,
        };
        check_all(&a, &p, &name);
        let a64 = a.cast_index::<i64>().unwrap();
        let p64 = Params {
            bsr_blocks: vec![4],
            col_parts: 4,
            bucket_log: 3,
            t: 4,
            g: 32,
            group: Some(3),
            nm: (1, 4),
            dense_ok: false,
        };
        check_all(&a64, &p64, &format!("{name} i64"));
    }
}

// ----------------------------------------------------------------------------------------
// Documented layouts on a tiny matrix
// ----------------------------------------------------------------------------------------

/// ```text
/// row 0: cols 0 1 2 3 4   values 1 2 3 4 5
/// row 1: (empty)
/// row 2: col 5            value 6
/// row 3: cols 1 3         values 7 8
/// ```
fn tiny() -> Csr<i32, f32> {
    Csr::try_new(
        4,
        6,
        vec![0, 5, 5, 6, 8],
        vec![0, 1, 2, 3, 4, 5, 1, 3],
        vec![1., 2., 3., 4., 5., 6., 7., 8.],
    )
    .unwrap()
}

#[test]
fn helpers() {
    let a = tiny();
    assert_eq!(max_row_length(&a), 5);
    assert_eq!(row_degree_histogram(&a), vec![1, 1, 1, 0, 0, 1]);
    assert_eq!(insum_group_size(8, 3), 2);
    assert_eq!(insum_group_size(0, 0), 1);
    assert_eq!(insum_group_size(100, 1), 8); // sqrt 100 = 10 -> 8
    assert_eq!(insum_group_size(1, 1), 1);
    assert!(check_canonical(&a).is_ok());
}

#[test]
fn row_segments_layout() {
    let a = tiny();
    let s = RowSegments::from_csr(&a, 2).unwrap();
    // Row 0 (5 entries) in three segments, row 1 in none, rows 2 and 3 in one each.
    assert_eq!(s.seg_ptr(), &[0, 2, 4, 5, 6, 8]);
    assert_eq!(s.seg_row(), &[0, 0, 0, 2, 3]);
    assert_eq!((s.len(), s.max_len()), (5, 2));
    let whole = RowSegments::from_csr(&a, 8).unwrap();
    assert_eq!(whole.seg_ptr(), &[0, 5, 6, 8]);
    assert_eq!(whole.seg_row(), &[0, 2, 3]);
    assert!(matches!(RowSegments::from_csr(&a, 0), Err(ComposeError::InvalidParameter { name: "max_len", .. })));
}

#[test]
fn row_segments_cover_every_entry_once_in_order() {
    for (name, path) in shared_matrices() {
        let a: Csr<i32, f32> = mtx::read_mtx_path(&path).unwrap();
        for max_len in [1, 3, 32, 1 << 20] {
            let s = RowSegments::from_csr(&a, max_len).unwrap();
            let (ptr, row) = (s.seg_ptr(), s.seg_row());
            assert_eq!((ptr[0], *ptr.last().unwrap() as usize), (0, a.nnz()), "{name}");
            for k in 0..s.len() {
                let (lo, hi, r) = (ptr[k] as usize, ptr[k + 1] as usize, row[k] as usize);
                assert!(lo < hi && hi - lo <= max_len, "{name}: segment {k}");
                assert!(a.indptr()[r] as usize <= lo && hi <= a.indptr()[r + 1] as usize, "{name}: segment {k} leaves row {r}");
            }
        }
    }
}

/// Every row once (empty rows last), each with its own entries in the CSR's order.
fn check_reordered(a: &Csr<i32, f32>, r: &ReorderedRows<i32>, name: &str) {
    let m = a.shape().0;
    let mut seen = vec![false; m];
    for &row in r.order() {
        assert!(!std::mem::replace(&mut seen[row as usize], true), "{name}: row {row} twice");
    }
    assert!(seen.iter().all(|&x| x), "{name}: a row is missing");
    assert_eq!((r.indptr()[0], r.indptr().len()), (0, m + 1), "{name}");
    let empty_from = r.order().iter().position(|&x| a.indptr()[x as usize] == a.indptr()[x as usize + 1]).unwrap_or(m);
    for (p, &row) in r.order().iter().enumerate() {
        let (lo, hi) = (a.indptr()[row as usize] as usize, a.indptr()[row as usize + 1] as usize);
        let (plo, phi) = (r.indptr()[p] as usize, r.indptr()[p + 1] as usize);
        assert_eq!(&r.indices()[plo..phi], &a.indices()[lo..hi], "{name}: row {row}");
        assert_eq!(&r.source()[plo..phi], &(lo..hi).collect::<Vec<_>>()[..], "{name}: row {row}");
        assert_eq!(p >= empty_from, lo == hi, "{name}: empty rows come last");
    }
}

#[test]
fn reordered_rows_hold_every_row_once_with_its_entries() {
    for (name, path) in shared_matrices() {
        let a: Csr<i32, f32> = mtx::read_mtx_path(&path).unwrap();
        check_reordered(&a, &ReorderedRows::rcm(&a).unwrap(), &name);
    }
    for seed in 0..20 {
        let a: Csr<i32, f32> = gen::with_empty_rows(37, 23, seed).unwrap();
        check_reordered(&a, &ReorderedRows::rcm(&a).unwrap(), &format!("empty rows, seed {seed}"));
    }
    let none: Csr<i32, f32> = Csr::try_new(3, 4, vec![0, 0, 0, 0], vec![], vec![]).unwrap();
    let r = ReorderedRows::rcm(&none).unwrap();
    assert_eq!((r.order(), r.indptr()), (&[0, 1, 2][..], &[0, 0, 0, 0][..]));
}

/// A tridiagonal matrix whose rows were shuffled: reverse Cuthill–McKee puts rows that share
/// columns next to each other again (neighbours in the order are at most 2 rows apart).
#[test]
fn reverse_cuthill_mckee_recovers_a_shuffled_band() {
    let n = 300;
    let band: Csr<i32, f32> = gen::banded(n, 1, 5).unwrap();
    let mut rng = gen::SplitMix64::new(9);
    let mut shuffle: Vec<usize> = (0..n).collect();
    for k in (1..n).rev() {
        shuffle.swap(k, rng.below(k as u64 + 1) as usize);
    }
    let (mut indptr, mut indices) = (vec![0i32], Vec::new());
    for &r in &shuffle {
        let (lo, hi) = (band.indptr()[r] as usize, band.indptr()[r + 1] as usize);
        indices.extend_from_slice(&band.indices()[lo..hi]);
        indptr.push(indices.len() as i32);
    }
    let values = vec![1.0f32; indices.len()];
    let shuffled = Csr::try_new(n, n, indptr, indices, values).unwrap();
    let r = ReorderedRows::rcm(&shuffled).unwrap();
    check_reordered(&shuffled, &r, "shuffled band");
    let original: Vec<i64> = r.order().iter().map(|&p| shuffle[p as usize] as i64).collect();
    assert!(original.windows(2).all(|w| (w[0] - w[1]).abs() <= 2), "{original:?}");
    // The stored order has a small bandwidth; the shuffled one does not.
    let spread = |order: &[usize]| order.windows(2).map(|w| w[0].abs_diff(w[1])).max().unwrap_or(0);
    assert!(spread(&shuffle) > 100);
}

#[test]
fn padded_bsr_layout() {
    let a = tiny();
    let pb = PaddedBsr::from_csr(&a, 4).unwrap();
    assert_eq!(pb.shape(), (4, 6));
    assert_eq!(pb.padded_shape(), (4, 8));
    assert_eq!(pb.bsr().indptr(), &[0, 2]);
    assert_eq!(pb.bsr().indices(), &[0, 1]);
    #[rustfmt::skip]
    let expect = vec![
        // block (0, 0): rows 0-3 x cols 0-3
        1., 2., 3., 4.,  0., 0., 0., 0.,  0., 0., 0., 0.,  0., 7., 0., 8.,
        // block (0, 1): rows 0-3 x cols 4-7 (cols 6, 7 are padding)
        5., 0., 0., 0.,  0., 0., 0., 0.,  0., 6., 0., 0.,  0., 0., 0., 0.,
    ];
    assert_eq!(pb.bsr().values(), &expect[..]);
    let pb = PaddedBsr::from_csr(&Csr::<i64, f32>::zeros(5, 7).unwrap(), 4).unwrap();
    assert_eq!(pb.padded_shape(), (8, 8));
    assert_eq!(pb.bsr().nnz_blocks(), 0);
}

#[test]
fn ell_and_pad_rows_layout() {
    let a = tiny();
    let ell = to_ell_k(&a, 5).unwrap();
    assert_eq!(
        ell.indices(),
        &[0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 5, 5, 5, 5, 5, 1, 3, 3, 3, 3]
    );
    assert_eq!(ell.lengths(), &[5, 0, 1, 2]);
    let pr = pad_rows_to_multiple(&a, 2).unwrap();
    assert_eq!(pr.csr().indptr(), &[0, 6, 6, 8, 10]);
    assert_eq!(pr.csr().indices(), &[0, 1, 2, 3, 4, 4, 5, 5, 1, 3]);
    assert_eq!(pr.csr().values(), &[1., 2., 3., 4., 5., 0., 6., 0., 7., 8.]);
    assert_eq!(pr.counts(), &[5, 0, 1, 2]);
    assert_eq!(pr.to_csr(), a);
}

#[test]
fn hyb_layout_one_part() {
    let a = tiny();
    let h = Hyb::from_csr(&a, 1, 1).unwrap();
    assert_eq!(h.bucket_widths(), vec![1, 2]);
    let b0 = &h.parts()[0][0];
    assert_eq!(b0.row_indices(), &[2]);
    assert_eq!(b0.col_indices(), &[5]);
    assert_eq!(b0.values(), &[6.]);
    assert_eq!(b0.counts(), &[1]);
    // Row 0 (5 entries > max width 2) is split into 3 chunks, the last padded.
    let b1 = &h.parts()[0][1];
    assert_eq!(b1.row_indices(), &[0, 0, 0, 3]);
    assert_eq!(b1.col_indices(), &[0, 1, 2, 3, 4, 4, 1, 3]);
    assert_eq!(b1.values(), &[1., 2., 3., 4., 5., 0., 7., 8.]);
    assert_eq!(b1.counts(), &[2, 2, 1, 2]);
    assert_eq!(h.total_slots(), 9);
    assert_eq!(h.to_csr(), a);
}

#[test]
fn hyb_layout_two_parts() {
    let a = tiny();
    let h = Hyb::from_csr(&a, 2, 1).unwrap();
    assert_eq!(h.part_size(), 3);
    insta::assert_debug_snapshot!(h.parts());
    assert_eq!(h.to_csr(), a);
}

#[test]
fn sr_bcrs_layout() {
    let a = tiny();
    let s = condense(&a, 2, 2).unwrap();
    // Tile 0 (rows 0-1): union {0,1,2,3,4} -> groups [0,1] [2,3] [4,pad];
    // tile 1 (rows 2-3): union {1,3,5} -> groups [1,3] [5,pad].
    assert_eq!(s.tile_ptr(), &[0, 3, 5]);
    assert_eq!(s.col_indices(), &[0, 1, 2, 3, 4, 4, 1, 3, 5, 5]);
    assert_eq!(s.group_counts(), &[2, 2, 1, 2, 1]);
    #[rustfmt::skip]
    let expect = vec![
        1., 2.,  0., 0.,   // group 0: row 0, row 1
        3., 4.,  0., 0.,   // group 1
        5., 0.,  0., 0.,   // group 2
        0., 0.,  7., 8.,   // group 3: row 2, row 3
        6., 0.,  0., 0.,   // group 4
    ];
    assert_eq!(s.values(), &expect[..]);
    assert_eq!(s.to_csr(), a);
}

#[test]
fn group_coo_layout() {
    let a = tiny();
    let g = GroupCoo::from_csr(&a).unwrap();
    assert_eq!(g.group_size(), 2);
    assert_eq!(g.group_rows(), &[0, 0, 0, 2, 3]);
    assert_eq!(g.col_indices(), &[0, 1, 2, 3, 4, 4, 5, 5, 1, 3]);
    assert_eq!(g.values(), &[1., 2., 3., 4., 5., 0., 6., 0., 7., 8.]);
    assert_eq!(g.group_counts(), &[2, 2, 1, 1, 2]);
    assert_eq!(g.to_csr(), a);
}

#[test]
fn block_group_coo_layout() {
    let a = tiny();
    let g = BlockGroupCoo::with_group_size(&a, 2, 2).unwrap();
    // 2x2 blocks: block row 0 has block cols 0,1,2; block row 1 has 0,1,2.
    insta::assert_debug_snapshot!((
        g.group_block_rows(),
        g.block_cols(),
        g.group_counts(),
        g.values()
    ));
    assert_eq!(g.to_csr().unwrap(), a);
}

#[test]
fn nm_2_4_layout() {
    // 2 x 8: row 0 has cols 1, 3 (group 0) and 6 (group 1); row 1 is empty.
    let a = Csr::<i32, f32>::try_new(2, 8, vec![0, 3, 3], vec![1, 3, 6], vec![1., 2., 3.]).unwrap();
    let nm = NmMatrix::from_csr_2_4(&a).unwrap();
    assert_eq!(nm.groups_per_row(), 2);
    assert_eq!(nm.index_bits(), 2);
    assert_eq!(nm.words_per_row(), 1);
    // group 0: idx 1 | 3 << 2 = 0xD; group 1: idx 0 (padding) | 2 << 2 = 0x8.
    // row 1: both groups padded with positions 0, 1: 0 | 1 << 2 = 0x4.
    assert_eq!(nm.metadata(), &[0x8D, 0x44]);
    assert_eq!(nm.values(), &[1., 2., 0., 3., 0., 0., 0., 0.]);
    assert_eq!(nm.position(0, 1, 1), Some(2));
    assert_eq!(nm.position(2, 0, 0), None);
    assert_eq!(nm.to_csr::<i32>().unwrap(), a);
    assert_eq!(nm.to_dense(), a.to_dense().unwrap());
    // K not a multiple of m: 1 x 6, the second group reaches past K.
    let b = Csr::<i64, f32>::try_new(1, 6, vec![0, 2], vec![4, 5], vec![1., 2.]).unwrap();
    let nm = NmMatrix::from_csr_2_4(&b).unwrap();
    assert_eq!(nm.metadata(), &[0x4 | (0x4 << 4)]);
    assert_eq!(nm.to_csr::<i64>().unwrap(), b);
    // 16 groups of 2:4 need two words per row.
    let wide = Csr::<i32, f32>::zeros(1, 64).unwrap();
    assert_eq!(NmMatrix::from_csr_2_4(&wide).unwrap().words_per_row(), 2);
}

#[test]
fn prune_keeps_largest() {
    let a = Csr::<i32, f64>::try_new(
        1,
        8,
        vec![0, 7],
        vec![0, 1, 2, 3, 4, 5, 7],
        vec![1., -5., 3., 2., 4., 4., 4.],
    )
    .unwrap();
    let p = prune_to_nm(&a, 2, 4).unwrap();
    assert_eq!(p.indices(), &[1, 2, 4, 5]);
    assert_eq!(p.values(), &[-5., 3., 4., 4.]);
    assert!(NmMatrix::from_csr(&p, 2, 4).is_ok());
}

// ----------------------------------------------------------------------------------------
// Errors
// ----------------------------------------------------------------------------------------

fn lenient(indices: Vec<i32>) -> Csr<i32, f32> {
    Csr::try_new_with(
        2,
        4,
        vec![0, 0, indices.len() as i32],
        indices.clone(),
        vec![1.0; indices.len()],
        &ValidateOptions::LENIENT,
    )
    .unwrap()
}

#[test]
fn unsorted_and_duplicate_inputs_are_rejected() {
    for (idx, dup) in [(vec![2, 1], false), (vec![1, 1], true)] {
        let a = lenient(idx);
        let check = |r: Result<(), ComposeError>| match r {
            Err(ComposeError::Unsorted {
                row: 1,
                pos: 1,
                index: 1,
                prev: 2,
            }) => assert!(!dup),
            Err(ComposeError::Duplicate {
                row: 1,
                pos: 1,
                index: 1,
            }) => assert!(dup),
            other => panic!("{other:?}"),
        };
        check(check_canonical(&a));
        check(PaddedBsr::from_csr(&a, 2).map(|_| ()));
        check(to_ell_k(&a, 4).map(|_| ()));
        check(pad_rows_to_multiple(&a, 2).map(|_| ()));
        check(Hyb::from_csr(&a, 1, 2).map(|_| ()));
        check(condense(&a, 2, 2).map(|_| ()));
        check(GroupCoo::from_csr(&a).map(|_| ()));
        check(BlockGroupCoo::from_csr(&a, 2).map(|_| ()));
        check(NmMatrix::from_csr(&a, 2, 4).map(|_| ()));
        check(prune_to_nm(&a, 2, 4).map(|_| ()));
    }
}

#[test]
fn nm_violation_names_row_and_group() {
    let a =
        Csr::<i32, f32>::try_new(2, 8, vec![0, 2, 5], vec![0, 1, 4, 5, 7], vec![1.; 5]).unwrap();
    let e = NmMatrix::from_csr_2_4(&a).unwrap_err();
    assert_eq!(
        e,
        ComposeError::NmViolation {
            row: 1,
            group: 1,
            first_col: 4,
            count: 3,
            n: 2,
            m: 4
        }
    );
    insta::assert_snapshot!(e.to_string(), @"row 1, group 1 (columns 4..4+4): 3 nonzeros, more than n = 2 of m = 4");
    let dense = a.to_dense().unwrap();
    assert_eq!(NmMatrix::from_dense(2, 8, &dense, 2, 4).unwrap_err(), e);
    // Stored zeros do not count.
    let z = Csr::<i32, f32>::try_new(1, 4, vec![0, 3], vec![0, 1, 2], vec![1., 0., 1.]).unwrap();
    let nm = NmMatrix::from_csr_2_4(&z).unwrap();
    assert_eq!(nm.to_csr::<i32>().unwrap(), nonzeros(&z));
}

#[test]
fn bad_parameters_are_rejected() {
    let a = tiny();
    let is_param = |r: Result<(), ComposeError>, want: &str| match r {
        Err(ComposeError::InvalidParameter { name, .. }) => assert_eq!(name, want),
        other => panic!("{want}: {other:?}"),
    };
    is_param(PaddedBsr::from_csr(&a, 0).map(|_| ()), "block size b");
    is_param(BlockGroupCoo::from_csr(&a, 0).map(|_| ()), "block size b");
    is_param(
        BlockGroupCoo::with_group_size(&a, 2, 0).map(|_| ()),
        "group_size",
    );
    is_param(pad_rows_to_multiple(&a, 0).map(|_| ()), "k");
    is_param(Hyb::from_csr(&a, 0, 2).map(|_| ()), "num_col_parts");
    is_param(Hyb::from_csr(&a, 1, 25).map(|_| ()), "bucket_log");
    is_param(condense(&a, 0, 2).map(|_| ()), "t");
    is_param(condense(&a, 2, 0).map(|_| ()), "g");
    is_param(GroupCoo::with_group_size(&a, 0).map(|_| ()), "group_size");
    is_param(NmMatrix::from_csr(&a, 3, 2).map(|_| ()), "n");
    is_param(NmMatrix::from_csr(&a, 0, 4).map(|_| ()), "n");
    is_param(NmMatrix::from_csr(&a, 1, 0).map(|_| ()), "m");
    is_param(NmMatrix::from_csr(&a, 9, 1024).map(|_| ()), "n");
    is_param(prune_to_nm(&a, 5, 4).map(|_| ()), "n");
    assert_eq!(
        to_ell_k(&a, 4).unwrap_err(),
        ComposeError::RowTooLong {
            row: 0,
            len: 5,
            k: 4
        }
    );
    assert_eq!(
        NmMatrix::<f32>::from_dense(2, 3, &[1.0; 5], 2, 4).unwrap_err(),
        ComposeError::DenseLength {
            len: 5,
            expected: 6
        }
    );
}
