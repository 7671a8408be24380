//! Prints the PTX (or, for `mlir`, the GPU module) of a workload (Stage III, default GPU schedule, 128 threads) for a chip.
//! `cargo run -p sparsec-backend-mlir --example ptx_of -- WORKLOAD [sm_80|mlir]`

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let name = args.next().ok_or("usage: ptx_of WORKLOAD [CHIP]")?;
    let chip = args.next().unwrap_or_else(|| "sm_80".into());
    let path = format!("{}/../tests/workloads/{name}.sptir", env!("CARGO_MANIFEST_DIR"));
    let f = sparsec_ir::text::parse_func(&path, &std::fs::read_to_string(&path)?)?;
    let f = sparsec_schedule::auto::gpu_schedule(&f, 128)?;
    if chip == "mlir" {
        println!("{}", sparsec_backend_mlir::emit_mlir(&f)?);
    } else {
        println!("{}", sparsec_backend_mlir::emit_ptx(&f, &chip)?);
    }
    Ok(())
}
