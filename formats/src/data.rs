//! Location of the shared test matrices.

use std::path::PathBuf;

/// Folder of the shared Matrix Market files: `$SPARSEC_DATA` if set (and non-empty),
/// else `<workspace root>/../shared/data`, the workspace root being this crate's parent.
pub fn data_dir() -> PathBuf {
    match std::env::var_os("SPARSEC_DATA") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("..")
            .join("shared")
            .join("data"),
    }
}

/// The `.mtx` files in [`data_dir`] as `(file stem, path)`, sorted by name; empty if the
/// folder is missing or unreadable.
pub fn shared_matrices() -> Vec<(String, PathBuf)> {
    let Ok(rd) = std::fs::read_dir(data_dir()) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "mtx"))
        .filter_map(|p| Some((p.file_stem()?.to_string_lossy().into_owned(), p)))
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_matrices_are_sorted_mtx_files() {
        let list = shared_matrices();
        assert!(list.windows(2).all(|w| w[0].0 <= w[1].0));
        for (name, path) in &list {
            assert_eq!(path.extension().and_then(|e| e.to_str()), Some("mtx"));
            assert_eq!(
                path.file_stem().and_then(|s| s.to_str()),
                Some(name.as_str())
            );
            assert!(path.starts_with(data_dir()));
        }
    }
}
