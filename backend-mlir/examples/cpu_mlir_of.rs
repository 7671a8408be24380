//! Prints the CPU module (before lowering) of a workload with the default CPU schedule.
//! `cargo run -p sparsec-backend-mlir --example cpu_mlir_of -- WORKLOAD [serial]`

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let name = args.next().ok_or("usage: cpu_mlir_of WORKLOAD [serial]")?;
    let serial = args.next().is_some_and(|a| a == "serial");
    let path = format!("{}/../tests/workloads/{name}.sptir", env!("CARGO_MANIFEST_DIR"));
    let f = sparsec_ir::text::parse_func(&path, &std::fs::read_to_string(&path)?)?;
    let f = sparsec_schedule::auto::cpu_schedule(&f)?;
    let opts = sparsec_backend_mlir::CpuOptions { parallel: !serial, ..Default::default() };
    println!("{}", sparsec_backend_mlir::emit_cpu_mlir(&f, &opts)?);
    Ok(())
}
