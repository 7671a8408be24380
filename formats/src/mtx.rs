//! Matrix Market (`.mtx`) coordinate reader and writer.
//!
//! Reads `%%MatrixMarket matrix coordinate {real|integer|pattern}
//! {general|symmetric|skew-symmetric}` (keywords case-insensitive), with `%` comment lines
//! and blank lines anywhere after the banner, 1-based indices, pattern values 1.0. Symmetric
//! files store one triangle: every off-diagonal entry `(i, j)` is mirrored to `(j, i)`
//! (negated for skew-symmetric), whichever triangle it is in, as scipy's `mmread` does.
//! Converting to CSR sums duplicates and sorts indices (scipy `tocsr`). Errors carry the
//! 1-based line and column (byte offset within the line) and say what was expected; the
//! reader never panics.

use crate::coo::Coo;
use crate::csr::Csr;
use crate::scalar::{Index, Value};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The value field of a Matrix Market file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtxField {
    /// Floating-point values.
    Real,
    /// Integer values (read as floats).
    Integer,
    /// No values; every entry is 1.0.
    Pattern,
}

/// The symmetry of a Matrix Market file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtxSymmetry {
    /// Every entry is listed.
    General,
    /// One triangle listed; `a[j][i] = a[i][j]`.
    Symmetric,
    /// One triangle listed; `a[j][i] = -a[i][j]`.
    SkewSymmetric,
}

/// Banner and size line of a Matrix Market file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MtxHeader {
    /// Value field.
    pub field: MtxField,
    /// Symmetry.
    pub symmetry: MtxSymmetry,
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// Number of entry lines declared.
    pub entries: usize,
    /// Line (1-based) of the size line.
    pub line: usize,
}

/// Errors of the Matrix Market reader and writer.
#[derive(Debug, Error)]
pub enum MtxError {
    /// The first line is not a valid banner.
    #[error("line {line}, column {col}: expected banner `%%MatrixMarket matrix coordinate <field> <symmetry>`, found {found}")]
    Banner {
        /// Line (1-based).
        line: usize,
        /// Column (1-based).
        col: usize,
        /// What was found: the line in backticks, or `end of input`.
        found: String,
    },
    /// A banner keyword names something this reader does not support.
    #[error("line {line}, column {col}: unsupported {what} `{found}`, expected {expected}")]
    Unsupported {
        /// Line (1-based).
        line: usize,
        /// Column (1-based).
        col: usize,
        /// Which banner word (`object`, `format`, `field`, `symmetry`).
        what: &'static str,
        /// The word found.
        found: String,
        /// What is supported.
        expected: &'static str,
    },
    /// Input ended before the size line.
    #[error("line {line}: expected size line `<rows> <cols> <entries>`, found end of input")]
    MissingSize {
        /// Last line read.
        line: usize,
    },
    /// A token is not the number expected.
    #[error("line {line}, column {col}: expected {expected}, found `{found}`")]
    BadNumber {
        /// Line (1-based).
        line: usize,
        /// Column (1-based).
        col: usize,
        /// What was expected.
        expected: &'static str,
        /// The token.
        found: String,
    },
    /// A line has fewer tokens than needed.
    #[error("line {line}, column {col}: expected {expected} tokens ({what}), found {found}")]
    TooFewTokens {
        /// Line (1-based).
        line: usize,
        /// Column just past the last token.
        col: usize,
        /// Tokens needed.
        expected: usize,
        /// Tokens found.
        found: usize,
        /// What the tokens are.
        what: &'static str,
    },
    /// A line has more tokens than allowed.
    #[error("line {line}, column {col}: expected {expected} tokens ({what}), found extra token `{found}`")]
    TooManyTokens {
        /// Line (1-based).
        line: usize,
        /// Column of the first extra token.
        col: usize,
        /// Tokens allowed.
        expected: usize,
        /// The first extra token.
        found: String,
        /// What the tokens are.
        what: &'static str,
    },
    /// A row or column index is 0 or beyond the size line.
    #[error("line {line}, column {col}: {what} index {value} out of range 1..={bound}")]
    IndexOutOfRange {
        /// Line (1-based).
        line: usize,
        /// Column (1-based).
        col: usize,
        /// `row` or `column`.
        what: &'static str,
        /// The index read.
        value: i64,
        /// The largest valid index.
        bound: usize,
    },
    /// Input ended before all declared entries were read.
    #[error("line {line}: expected {expected} entries, found only {found} before end of input")]
    TooFewEntries {
        /// Last line read.
        line: usize,
        /// Declared entries.
        expected: usize,
        /// Entries read.
        found: usize,
    },
    /// An entry line after the declared number of entries.
    #[error("line {line}: expected {expected} entries, found more")]
    TooManyEntries {
        /// The line of the first extra entry.
        line: usize,
        /// Declared entries.
        expected: usize,
    },
    /// A symmetric or skew-symmetric matrix that is not square.
    #[error("line {line}: a {symmetry} matrix must be square, found {rows} x {cols}")]
    NotSquare {
        /// The size line.
        line: usize,
        /// `symmetric` or `skew-symmetric`.
        symmetry: &'static str,
        /// Rows declared.
        rows: usize,
        /// Columns declared.
        cols: usize,
    },
    /// A dimension or the number of stored entries does not fit the index type.
    #[error("line {line}: {what} = {value} does not fit the index type {index}")]
    TooLarge {
        /// Line (1-based).
        line: usize,
        /// What overflowed.
        what: &'static str,
        /// Its value.
        value: usize,
        /// Index type name.
        index: &'static str,
    },
    /// The row pointer array of the declared rows cannot be allocated.
    #[error(
        "line {line}: rows = {value}: its row pointer array (rows + 1 entries) cannot be allocated"
    )]
    Alloc {
        /// The size line.
        line: usize,
        /// Declared rows.
        value: usize,
    },
    /// A line is not valid UTF-8.
    #[error("line {line}: not valid UTF-8")]
    Utf8 {
        /// Line (1-based).
        line: usize,
    },
    /// Reading or writing failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// An error in a named file.
    #[error("{}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: Box<MtxError>,
    },
}

/// Whitespace-separated tokens of a line with their 1-based columns.
fn tokens(line: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        if c.is_whitespace() {
            if let Some(s) = start.take() {
                out.push((s + 1, &line[s..i]));
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push((s + 1, &line[s..]));
    }
    out
}

/// Checks the token count of a line.
fn expect_count(
    line: usize,
    text: &str,
    toks: &[(usize, &str)],
    n: usize,
    what: &'static str,
) -> Result<(), MtxError> {
    if toks.len() < n {
        return Err(MtxError::TooFewTokens {
            line,
            col: text.trim_end().len() + 1,
            expected: n,
            found: toks.len(),
            what,
        });
    }
    if toks.len() > n {
        let (col, t) = toks[n];
        return Err(MtxError::TooManyTokens {
            line,
            col,
            expected: n,
            found: t.to_string(),
            what,
        });
    }
    Ok(())
}

fn parse_usize(
    line: usize,
    (col, t): (usize, &str),
    expected: &'static str,
) -> Result<usize, MtxError> {
    t.parse::<usize>().map_err(|_| MtxError::BadNumber {
        line,
        col,
        expected,
        found: t.to_string(),
    })
}

/// Parses a 1-based index and returns it 0-based.
fn parse_index(
    line: usize,
    (col, t): (usize, &str),
    what: &'static str,
    bound: usize,
) -> Result<usize, MtxError> {
    let expected = if what == "row" {
        "an integer row index"
    } else {
        "an integer column index"
    };
    let v = t.parse::<i64>().map_err(|_| MtxError::BadNumber {
        line,
        col,
        expected,
        found: t.to_string(),
    })?;
    if v < 1 || v as u64 > bound as u64 {
        return Err(MtxError::IndexOutOfRange {
            line,
            col,
            what,
            value: v,
            bound,
        });
    }
    Ok(v as usize - 1)
}

fn parse_value(line: usize, (col, t): (usize, &str), field: MtxField) -> Result<f64, MtxError> {
    match field {
        MtxField::Pattern => Ok(1.0),
        MtxField::Integer => t
            .parse::<i64>()
            .map(|v| v as f64)
            .map_err(|_| MtxError::BadNumber {
                line,
                col,
                expected: "an integer value",
                found: t.to_string(),
            }),
        MtxField::Real => t
            .parse::<f64>()
            // Fortran-style exponents (`1.5D+03`).
            .or_else(|e| {
                if t.contains(['d', 'D']) {
                    t.replace(['d', 'D'], "e").parse::<f64>()
                } else {
                    Err(e)
                }
            })
            .map_err(|_| MtxError::BadNumber {
                line,
                col,
                expected: "a real value",
                found: t.to_string(),
            }),
    }
}

fn parse_banner(line: usize, text: &str) -> Result<(MtxField, MtxSymmetry), MtxError> {
    let toks = tokens(text);
    let banner_err = || MtxError::Banner {
        line,
        col: 1,
        found: format!("`{}`", text.trim_end()),
    };
    if toks.is_empty() || !toks[0].1.eq_ignore_ascii_case("%%MatrixMarket") {
        return Err(banner_err());
    }
    if toks.len() < 5 {
        return Err(banner_err());
    }
    let low = |i: usize| toks[i].1.to_ascii_lowercase();
    let unsupported = |i: usize, what, expected| MtxError::Unsupported {
        line,
        col: toks[i].0,
        what,
        found: toks[i].1.to_string(),
        expected,
    };
    if low(1) != "matrix" {
        return Err(unsupported(1, "object", "`matrix`"));
    }
    if low(2) != "coordinate" {
        return Err(unsupported(2, "format", "`coordinate`"));
    }
    let field = match low(3).as_str() {
        "real" => MtxField::Real,
        "integer" => MtxField::Integer,
        "pattern" => MtxField::Pattern,
        _ => return Err(unsupported(3, "field", "`real`, `integer` or `pattern`")),
    };
    let symmetry = match low(4).as_str() {
        "general" => MtxSymmetry::General,
        "symmetric" => MtxSymmetry::Symmetric,
        "skew-symmetric" => MtxSymmetry::SkewSymmetric,
        _ => {
            return Err(unsupported(
                4,
                "symmetry",
                "`general`, `symmetric` or `skew-symmetric`",
            ))
        }
    };
    expect_count(line, text, &toks, 5, "banner words")?;
    Ok((field, symmetry))
}

/// Parses Matrix Market bytes into its header and a COO matrix (entries in file order,
/// mirrored entries right after their original; duplicates not yet summed).
pub fn parse_mtx<I: Index, V: Value>(input: &[u8]) -> Result<(MtxHeader, Coo<I, V>), MtxError> {
    // A final newline ends the last line; it does not start an empty one.
    let input = input.strip_suffix(b"\n").unwrap_or(input);
    // Each line with the number of input bytes after it.
    let mut lines = input.split(|&b| b == b'\n').enumerate().map(|(n, raw)| {
        let after = input.len() - (raw.as_ptr() as usize - input.as_ptr() as usize) - raw.len();
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        std::str::from_utf8(raw)
            .map(|s| (n + 1, s, after))
            .map_err(|_| MtxError::Utf8 { line: n + 1 })
    });
    // Banner.
    let (field, symmetry) = match lines.next() {
        Some(_) if input.is_empty() => {
            return Err(MtxError::Banner {
                line: 1,
                col: 1,
                found: "end of input".into(),
            })
        }
        Some(l) => {
            let (n, text, _) = l?;
            parse_banner(n, text)?
        }
        None => {
            return Err(MtxError::Banner {
                line: 1,
                col: 1,
                found: "end of input".into(),
            })
        }
    };
    // Size line: first line that is neither blank nor a comment.
    let mut last = 1;
    let mut size = None;
    for l in lines.by_ref() {
        let (n, text, after) = l?;
        last = n;
        let t = text.trim_start();
        if t.is_empty() || t.starts_with('%') {
            continue;
        }
        let toks = tokens(text);
        expect_count(n, text, &toks, 3, "rows, columns, entries")?;
        let rows = parse_usize(n, toks[0], "a non-negative integer row count")?;
        let cols = parse_usize(n, toks[1], "a non-negative integer column count")?;
        let entries = parse_usize(n, toks[2], "a non-negative integer entry count")?;
        size = Some((n, rows, cols, entries, after));
        break;
    }
    let Some((size_line, rows, cols, entries, rest)) = size else {
        return Err(MtxError::MissingSize { line: last });
    };
    if symmetry != MtxSymmetry::General && rows != cols {
        let symmetry = if symmetry == MtxSymmetry::Symmetric {
            "symmetric"
        } else {
            "skew-symmetric"
        };
        return Err(MtxError::NotSquare {
            line: size_line,
            symmetry,
            rows,
            cols,
        });
    }
    for (what, value) in [("rows", rows), ("cols", cols)] {
        if value > I::MAX_USIZE {
            return Err(MtxError::TooLarge {
                line: size_line,
                what,
                value,
                index: I::DTYPE.name(),
            });
        }
    }
    let header = MtxHeader {
        field,
        symmetry,
        rows,
        cols,
        entries,
        line: size_line,
    };
    let ntok = if field == MtxField::Pattern { 2 } else { 3 };
    let what = if field == MtxField::Pattern {
        "row, column"
    } else {
        "row, column, value"
    };
    // The declared count is untrusted: reserve no more than the rest of the input can hold,
    // an entry line taking at least `ntok` one-byte tokens, their separators and a newline.
    let cap = entries.min(rest / (2 * ntok));
    let (mut ri, mut ci, mut vals) = (
        Vec::with_capacity(cap),
        Vec::with_capacity(cap),
        Vec::with_capacity(cap),
    );
    let mut read = 0usize;
    for l in lines {
        let (n, text, _) = l?;
        last = n;
        let t = text.trim_start();
        if t.is_empty() || t.starts_with('%') {
            continue;
        }
        if read == entries {
            return Err(MtxError::TooManyEntries {
                line: n,
                expected: entries,
            });
        }
        let toks = tokens(text);
        expect_count(n, text, &toks, ntok, what)?;
        let i = parse_index(n, toks[0], "row", rows)?;
        let j = parse_index(n, toks[1], "column", cols)?;
        let v = if ntok == 3 {
            parse_value(n, toks[2], field)?
        } else {
            1.0
        };
        read += 1;
        let mirror = match symmetry {
            MtxSymmetry::General => None,
            _ if i == j => None,
            MtxSymmetry::Symmetric => Some(v),
            MtxSymmetry::SkewSymmetric => Some(-v),
        };
        for (a, b, x) in std::iter::once((i, j, v)).chain(mirror.map(|m| (j, i, m))) {
            if ri.len() >= I::MAX_USIZE {
                return Err(MtxError::TooLarge {
                    line: n,
                    what: "nnz",
                    value: ri.len() + 1,
                    index: I::DTYPE.name(),
                });
            }
            ri.push(I::from_ix(a));
            ci.push(I::from_ix(b));
            vals.push(V::from_f64(x));
        }
    }
    if read < entries {
        return Err(MtxError::TooFewEntries {
            line: last,
            expected: entries,
            found: read,
        });
    }
    Ok((
        header,
        Coo {
            rows,
            cols,
            row: ri,
            col: ci,
            values: vals,
        },
    ))
}

/// Converts a parsed file to CSR, refusing a row count whose row pointer array cannot be
/// allocated (instead of aborting or panicking on the allocation).
fn csr_of<I: Index, V: Value>((h, coo): (MtxHeader, Coo<I, V>)) -> Result<Csr<I, V>, MtxError> {
    let alloc = MtxError::Alloc {
        line: h.line,
        value: h.rows,
    };
    // `to_csr` counts rows in a `usize` array and then fills an `I` one.
    let mut probe: Vec<usize> = Vec::new();
    probe
        .try_reserve_exact(h.rows.checked_add(1).ok_or(alloc)?)
        .map_err(|_| MtxError::Alloc {
            line: h.line,
            value: h.rows,
        })?;
    drop(probe);
    Ok(coo.to_csr())
}

/// Reads Matrix Market data from `r` into a COO matrix (see [`parse_mtx`]).
pub fn read_mtx_coo<I: Index, V: Value, R: Read>(mut r: R) -> Result<Coo<I, V>, MtxError> {
    let mut buf = Vec::new();
    r.read_to_end(&mut buf)?;
    Ok(parse_mtx(&buf)?.1)
}

/// Reads Matrix Market data from `r` into a CSR matrix with sorted indices and
/// duplicates summed.
pub fn read_mtx<I: Index, V: Value, R: Read>(mut r: R) -> Result<Csr<I, V>, MtxError> {
    let mut buf = Vec::new();
    r.read_to_end(&mut buf)?;
    csr_of(parse_mtx(&buf)?)
}

/// Parses a Matrix Market string into CSR (sorted, duplicates summed).
pub fn read_mtx_str<I: Index, V: Value>(s: &str) -> Result<Csr<I, V>, MtxError> {
    csr_of(parse_mtx::<I, V>(s.as_bytes())?)
}

/// Reads a Matrix Market file into CSR (sorted, duplicates summed); errors name the path.
pub fn read_mtx_path<I: Index, V: Value>(path: impl AsRef<Path>) -> Result<Csr<I, V>, MtxError> {
    let path = path.as_ref();
    let wrap = |e: MtxError| MtxError::File {
        path: path.to_path_buf(),
        source: Box::new(e),
    };
    let bytes = std::fs::read(path).map_err(|e| wrap(e.into()))?;
    parse_mtx::<I, V>(&bytes).and_then(csr_of).map_err(wrap)
}

/// Writes a COO matrix as `coordinate real general` (entries in storage order, 1-based).
pub fn write_mtx_coo<I: Index, V: Value, W: Write>(
    mut w: W,
    m: &Coo<I, V>,
) -> Result<(), MtxError> {
    writeln!(w, "%%MatrixMarket matrix coordinate real general")?;
    writeln!(w, "% written by sparsec-formats")?;
    writeln!(w, "{} {} {}", m.rows, m.cols, m.nnz())?;
    for p in 0..m.nnz() {
        writeln!(
            w,
            "{} {} {}",
            m.row[p].ix() + 1,
            m.col[p].ix() + 1,
            m.values[p]
        )?;
    }
    w.flush()?;
    Ok(())
}

/// Writes a CSR matrix as `coordinate real general`, row by row.
pub fn write_mtx<I: Index, V: Value, W: Write>(mut w: W, m: &Csr<I, V>) -> Result<(), MtxError> {
    writeln!(w, "%%MatrixMarket matrix coordinate real general")?;
    writeln!(w, "% written by sparsec-formats")?;
    writeln!(w, "{} {} {}", m.rows, m.cols, m.nnz())?;
    for i in 0..m.rows {
        for p in m.indptr[i].ix()..m.indptr[i + 1].ix() {
            writeln!(w, "{} {} {}", i + 1, m.indices[p].ix() + 1, m.values[p])?;
        }
    }
    w.flush()?;
    Ok(())
}

/// Writes a CSR matrix to a file; errors name the path.
pub fn write_mtx_path<I: Index, V: Value>(
    path: impl AsRef<Path>,
    m: &Csr<I, V>,
) -> Result<(), MtxError> {
    let path = path.as_ref();
    let wrap = |e: MtxError| MtxError::File {
        path: path.to_path_buf(),
        source: Box::new(e),
    };
    let f = std::fs::File::create(path).map_err(|e| wrap(e.into()))?;
    write_mtx(std::io::BufWriter::new(f), m).map_err(wrap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_carry_one_based_columns() {
        assert_eq!(
            tokens("  12 3\t-4.5 "),
            vec![(3, "12"), (6, "3"), (8, "-4.5")]
        );
        assert!(tokens(" \t ").is_empty());
    }

    #[test]
    fn header_is_reported() {
        let (h, coo) = parse_mtx::<i64, f32>(
            b"%%MatrixMarket matrix coordinate pattern general\n2 3 1\n2 3\n",
        )
        .unwrap();
        assert_eq!(
            h,
            MtxHeader {
                field: MtxField::Pattern,
                symmetry: MtxSymmetry::General,
                rows: 2,
                cols: 3,
                entries: 1,
                line: 2
            }
        );
        assert_eq!(
            (coo.row_indices(), coo.col_indices(), coo.values()),
            (&[1i64][..], &[2i64][..], &[1.0f32][..])
        );
    }
}
