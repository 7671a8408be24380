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

/// The comments of `src`, in order (`#` to the end of the line, outside string literals).
fn comments_of(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in src.lines() {
        let mut in_string = false;
        for (i, c) in line.char_indices() {
            match c {
                '"' => in_string = !in_string,
                '#' if !in_string => {
                    out.push(line[i..].trim_end().to_string());
                    break;
                }
                _ => {}
            }
        }
    }
    out
}

/// `print_module_with_comments` (what `sparsec fmt` prints) keeps every comment, in order, on
/// every workload and on a file with comments in every place; its output parses to the same
/// IR and formats to itself.
#[test]
fn formatting_keeps_comments() {
    let hand = r#"# Two functions.
# The first scales a vector.
func scale(x: handle, n: i32) attrs(note = "a # b") {  # header
  # axes
  axis I = dense_fixed(n)  # rows
  buffer X = match_sparse_buffer(x, [I], f32)
  sp_iter s([I], "S") as [i] {
    # the body
    X[i] = X[i] * 2.0  # doubled
    # last in the body
  }
  # last in the function
}

# The second has loops and branches.
func loops(y: handle, n: i32) stage III {
  buffer Y = match_buffer(y, [n], f32)
  for i in serial(n) {  # outer
    if i < 2 {
      Y[i] = 0.0
      # then, not else
    } else {
      Y[i] = 1.0
    }
  }
}
# the end
"#;
    let mut files: Vec<(String, String)> = vec![("hand".into(), hand.into())];
    for path in workloads() {
        files.push((path.display().to_string(), std::fs::read_to_string(&path).unwrap()));
    }
    for (name, src) in files {
        let m = parse(&name, &src).unwrap_or_else(|e| panic!("{e}"));
        let printed = sparsec_ir::text::print_module_with_comments(&m, &src);
        assert_eq!(comments_of(&printed), comments_of(&src), "{name}:\n{printed}");
        let again = parse("printed", &printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
        assert_eq!(m, again, "{name}: the IR is unchanged");
        assert_eq!(sparsec_ir::text::print_module_with_comments(&again, &printed), printed, "{name}: formatting is stable");
    }
    assert!(comments_of(hand).len() == 13 && !comments_of(hand).iter().any(|c| c.contains("a # b")));
    let printed = sparsec_ir::text::print_module_with_comments(&parse("hand", hand).unwrap(), hand);
    insta::assert_snapshot!("formatted_with_comments", printed);
}
