//! NumPy `.npy` files to and from [`Array`]s.
//!
//! The reader checks everything the header claims before it allocates: the shape's product
//! (checked, no wrap-around) times the element size must equal the data bytes in the file.
//! Fortran-order files are transposed to C order, so the result is always row-major.

use npyz::WriterBuilder;
use sparsec_ir::data::Array;
use std::path::{Path, PathBuf};

/// A `.npy` file that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// The file system failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// The element type has no sparsec dtype.
    #[error("{path}: unsupported .npy element type `{descr}` (expected i4, i8, f2, f4, f8 or b1, little-endian)")]
    UnsupportedType {
        /// The file.
        path: PathBuf,
        /// NumPy's type string.
        descr: String,
    },
    /// The magic string, version or header dictionary is malformed.
    #[error("{path}: not a valid .npy file: {message}")]
    Header {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The shape's element count overflows.
    #[error("{path}: shape {shape} has too many elements (the product overflows)")]
    ShapeOverflow {
        /// The file.
        path: PathBuf,
        /// The shape, as in the header.
        shape: String,
    },
    /// The data bytes present differ from what the shape and element type need.
    #[error("{path}: shape {shape} of `{descr}` needs {expected} data bytes, the file has {found}")]
    Length {
        /// The file.
        path: PathBuf,
        /// The shape.
        shape: String,
        /// NumPy's type string.
        descr: String,
        /// Bytes the header implies.
        expected: usize,
        /// Bytes present after the header.
        found: usize,
    },
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> NpyError + '_ {
    move |source| NpyError::Io { path: path.to_path_buf(), source }
}

/// Formats a shape as NumPy prints it: `(3,)`, `(2, 4)`, `()`.
pub fn shape_string(shape: &[u64]) -> String {
    match shape {
        [d] => format!("({d},)"),
        _ => format!("({})", shape.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")),
    }
}

/// A value of the header dictionary (the subset of Python literals `.npy` headers use).
#[derive(Debug)]
enum Lit {
    Str(String),
    Bool(bool),
    Int(u64),
    Seq(Vec<Lit>),
}

/// Parser over the header dictionary text.
struct Lexer<'a> {
    s: &'a [u8],
    at: usize,
}

impl Lexer<'_> {
    fn skip_ws(&mut self) {
        while self.at < self.s.len() && self.s[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        let hit = self.s.get(self.at) == Some(&c);
        self.at += usize::from(hit);
        hit
    }

    fn value(&mut self, depth: usize) -> Result<Lit, String> {
        self.skip_ws();
        let rest = &self.s[self.at..];
        match rest.first() {
            Some(&q @ (b'\'' | b'"')) => {
                let len = rest[1..].iter().position(|&c| c == q).ok_or("unterminated string")?;
                self.at += len + 2;
                Ok(Lit::Str(String::from_utf8_lossy(&rest[1..=len]).into_owned()))
            }
            Some(&open @ (b'(' | b'[')) if depth < 8 => {
                let close = if open == b'(' { b')' } else { b']' };
                self.at += 1;
                let mut items = Vec::new();
                while !self.eat(close) {
                    items.push(self.value(depth + 1)?);
                    if !self.eat(b',') {
                        if !self.eat(close) {
                            return Err(format!("expected `,` or `{}` at byte {}", close as char, self.at));
                        }
                        break;
                    }
                }
                Ok(Lit::Seq(items))
            }
            Some(c) if c.is_ascii_digit() => {
                let len = rest.iter().take_while(|c| c.is_ascii_digit()).count();
                let text = std::str::from_utf8(&rest[..len]).unwrap_or_default();
                self.at += len;
                text.parse().map(Lit::Int).map_err(|_| format!("integer `{text}` is too large"))
            }
            _ if rest.starts_with(b"True") => {
                self.at += 4;
                Ok(Lit::Bool(true))
            }
            _ if rest.starts_with(b"False") => {
                self.at += 5;
                Ok(Lit::Bool(false))
            }
            _ => Err(format!("unexpected `{}` at byte {}", String::from_utf8_lossy(&rest[..rest.len().min(10)]), self.at)),
        }
    }

    /// `{'key': value, ...}` with string keys.
    fn dict(&mut self) -> Result<Vec<(String, Lit)>, String> {
        if !self.eat(b'{') {
            return Err("header is not a dictionary".into());
        }
        let mut out = Vec::new();
        while !self.eat(b'}') {
            let Lit::Str(key) = self.value(0)? else { return Err("dictionary key is not a string".into()) };
            if !self.eat(b':') {
                return Err(format!("expected `:` after '{key}'"));
            }
            out.push((key, self.value(0)?));
            if !self.eat(b',') {
                if !self.eat(b'}') {
                    return Err(format!("expected `,` or `}}` at byte {}", self.at));
                }
                break;
            }
        }
        Ok(out)
    }
}

/// The header of a `.npy` file and where its data starts.
struct Header {
    descr: String,
    fortran: bool,
    shape: Vec<u64>,
    data: usize,
}

fn parse_header(bytes: &[u8]) -> Result<Header, String> {
    let rest = bytes.strip_prefix(b"\x93NUMPY").ok_or("missing the `\\x93NUMPY` magic string")?;
    let (len, start): (usize, usize) = match rest {
        [1, _, a, b, ..] => (usize::from(u16::from_le_bytes([*a, *b])), 10),
        [2 | 3, _, a, b, c, d, ..] => (u32::from_le_bytes([*a, *b, *c, *d]) as usize, 12),
        [major, ..] => return Err(format!("unsupported version {major}")),
        [] => return Err("truncated before the version".into()),
    };
    let end = start.checked_add(len).filter(|&e| e <= bytes.len()).ok_or("header runs past the end of the file")?;
    let mut lex = Lexer { s: &bytes[start..end], at: 0 };
    let dict = lex.dict()?;
    let get = |key: &str| dict.iter().find(|(k, _)| k == key).map(|(_, v)| v).ok_or(format!("missing key '{key}'"));
    let Lit::Str(descr) = get("descr")? else { return Err("'descr' is not a type string (structured arrays are not supported)".into()) };
    let Lit::Bool(fortran) = get("fortran_order")? else { return Err("'fortran_order' is not True or False".into()) };
    let Lit::Seq(dims) = get("shape")? else { return Err("'shape' is not a tuple".into()) };
    let shape = dims
        .iter()
        .map(|d| match d {
            Lit::Int(v) => Ok(*v),
            _ => Err("'shape' holds something other than non-negative integers".to_string()),
        })
        .collect::<Result<_, _>>()?;
    Ok(Header { descr: descr.clone(), fortran: *fortran, shape, data: end })
}

/// Reorders Fortran-order (first index fastest) elements into C order (last index fastest).
fn fortran_to_c<T: Copy>(v: Vec<T>, shape: &[usize]) -> Vec<T> {
    if shape.len() < 2 || v.is_empty() {
        return v;
    }
    // Fortran strides; walk C order with an odometer over the multi-index.
    let mut strides = vec![1usize; shape.len()];
    for k in 1..shape.len() {
        strides[k] = strides[k - 1] * shape[k - 1];
    }
    let mut idx = vec![0usize; shape.len()];
    let mut offset = 0usize;
    let mut out = Vec::with_capacity(v.len());
    for _ in 0..v.len() {
        out.push(v[offset]);
        for k in (0..shape.len()).rev() {
            idx[k] += 1;
            offset += strides[k];
            if idx[k] < shape[k] {
                break;
            }
            offset -= strides[k] * shape[k];
            idx[k] = 0;
        }
    }
    out
}

/// Reads a `.npy` file as a C-order array and its shape.
pub fn read_shaped(path: &Path) -> Result<(Array, Vec<u64>), NpyError> {
    let bytes = std::fs::read(path).map_err(io_err(path))?;
    let h = parse_header(&bytes).map_err(|message| NpyError::Header { path: path.to_path_buf(), message })?;
    let descr = h.descr.trim_start_matches(['<', '|']);
    let size: usize = match descr {
        "b1" => 1,
        "f2" => 2,
        "i4" | "f4" => 4,
        "i8" | "f8" => 8,
        _ => return Err(NpyError::UnsupportedType { path: path.to_path_buf(), descr: h.descr.clone() }),
    };
    let shape_str = || shape_string(&h.shape);
    let dims: Vec<usize> = h
        .shape
        .iter()
        .map(|&d| usize::try_from(d).ok())
        .collect::<Option<_>>()
        .ok_or_else(|| NpyError::ShapeOverflow { path: path.to_path_buf(), shape: shape_str() })?;
    let expected = dims
        .iter()
        .try_fold(size, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| NpyError::ShapeOverflow { path: path.to_path_buf(), shape: shape_str() })?;
    let data = &bytes[h.data..];
    if data.len() != expected {
        return Err(NpyError::Length {
            path: path.to_path_buf(),
            shape: shape_str(),
            descr: h.descr.clone(),
            expected,
            found: data.len(),
        });
    }
    fn decode<T: Copy, const N: usize>(data: &[u8], dims: &[usize], fortran: bool, f: fn([u8; N]) -> T) -> Vec<T> {
        let v = data.chunks_exact(N).map(|c| f(c.try_into().expect("chunks of N bytes"))).collect();
        if fortran {
            fortran_to_c(v, dims)
        } else {
            v
        }
    }
    let (d, fo) = (&dims[..], h.fortran);
    let array = match descr {
        "i4" => Array::I32(decode(data, d, fo, i32::from_le_bytes)),
        "i8" => Array::I64(decode(data, d, fo, i64::from_le_bytes)),
        "f4" => Array::F32(decode(data, d, fo, f32::from_le_bytes)),
        "f8" => Array::F64(decode(data, d, fo, f64::from_le_bytes)),
        "f2" => Array::F16(decode(data, d, fo, |b: [u8; 2]| half::f16::from_le_bytes(b).to_f32())),
        _ => Array::Bool(decode(data, d, fo, |b: [u8; 1]| b[0] != 0)),
    };
    Ok((array, h.shape))
}

/// Reads a `.npy` file of any shape as a flat C-order array.
pub fn read(path: &Path) -> Result<Array, NpyError> {
    Ok(read_shaped(path)?.0)
}

/// Writes an array as a `.npy` file with the given shape (its product must be the length).
pub fn write(path: &Path, array: &Array, shape: &[u64]) -> Result<(), NpyError> {
    fn put<T: npyz::AutoSerialize + Copy>(path: &Path, shape: &[u64], data: &[T]) -> Result<(), NpyError> {
        let file = std::fs::File::create(path).map_err(io_err(path))?;
        let mut w = npyz::WriteOptions::new()
            .default_dtype()
            .shape(shape)
            .writer(std::io::BufWriter::new(file))
            .begin_nd()
            .map_err(io_err(path))?;
        w.extend(data.iter().copied()).map_err(io_err(path))?;
        w.finish().map_err(io_err(path))
    }
    match array {
        Array::I32(v) => put(path, shape, v),
        Array::I64(v) => put(path, shape, v),
        Array::F32(v) => put(path, shape, v),
        Array::F64(v) => put(path, shape, v),
        Array::F16(v) | Array::BF16(v) => put(path, shape, v),
        Array::Bool(v) => put(path, shape, v),
    }
}
