//! Every workload of the corpus parses, and printing then parsing gives the same IR.

use sparsec_ir::text::{parse, print_module};
use std::path::PathBuf;

fn workloads() -> Vec<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/workloads"));
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/workloads exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sptir"))
        .collect();
    v.sort();
    v
}

#[test]
fn corpus_has_the_nineteen_sparsetir_programs() {
    assert_eq!(workloads().len(), 19);
}

#[test]
fn corpus_roundtrips() {
    for path in workloads() {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let src = std::fs::read_to_string(&path).unwrap();
        let m = parse(&path.display().to_string(), &src).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.funcs.len(), 1);
        assert_eq!(m.funcs[0].name, name, "file name matches the function name");
        let printed = print_module(&m);
        let again = parse("printed", &printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
        assert_eq!(m, again, "{name}: parse(print(f)) == f");
        assert_eq!(printed, print_module(&again), "{name}: printing is stable");
        insta::assert_snapshot!(name, printed);
    }
}
