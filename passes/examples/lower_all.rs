//! Prints Stage II and III of each file given (debugging aid; `sparsec lower` is the tool).
fn main() {
    for path in std::env::args().skip(1) {
        let text = std::fs::read_to_string(&path).unwrap();
        let f = sparsec_ir::text::parse_func(&path, &text).unwrap();
        match sparsec_passes::lower_sparse_iter(&f) {
            Ok(g) => {
                print!("{}", sparsec_ir::text::print_func(&g));
                if let Err(e) = sparsec_ir::verify::verify_func(&g) {
                    println!("VERIFY {path}: {e:?}");
                }
                match sparsec_passes::lower_sparse_buffer(&g) {
                    Ok(h) => print!("{}", sparsec_ir::text::print_func(&h)),
                    Err(e) => println!("ERROR {path}: {e}"),
                }
            }
            Err(e) => println!("ERROR {path}: {e}"),
        }
    }
}
