//! Prints the CPU module (before lowering) of a workload or `.sptir` file with the default CPU
//! schedule, or with `asm` the machine code the JIT makes of it (`llvm-objdump`).
//! `cargo run -p sparsec-backend-mlir --example cpu_mlir_of -- WORKLOAD|FILE.sptir [serial] [asm]`

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let name = args.next().ok_or("usage: cpu_mlir_of WORKLOAD|FILE.sptir [serial] [asm]")?;
    let rest: Vec<String> = args.collect();
    let serial = rest.iter().any(|a| a == "serial");
    let asm = rest.iter().any(|a| a == "asm");
    let path = if name.ends_with(".sptir") {
        name
    } else {
        format!("{}/../tests/workloads/{name}.sptir", env!("CARGO_MANIFEST_DIR"))
    };
    let f = sparsec_ir::text::parse_func(&path, &std::fs::read_to_string(&path)?)?;
    let f = sparsec_schedule::auto::cpu_schedule(&f)?;
    let opts = sparsec_backend_mlir::CpuOptions { parallel: !serial, keep_object: asm, ..Default::default() };
    if !asm {
        println!("{}", sparsec_backend_mlir::emit_cpu_mlir(&f, &opts)?);
        return Ok(());
    }
    let k = sparsec_backend_mlir::CpuKernel::compile(&f, &opts)?;
    let obj = std::env::temp_dir().join(format!("sparsec-cpu-{}.o", std::process::id()));
    k.write_object(&obj)?;
    let prefix = option_env!("MLIR_SYS_220_PREFIX").unwrap_or("/usr/lib/llvm-22");
    let out = std::process::Command::new(format!("{prefix}/bin/llvm-objdump"))
        .args(["-d", "--no-show-raw-insn", "--x86-asm-syntax=att"])
        .arg(&obj)
        .output()?;
    std::fs::remove_file(&obj)?;
    print!("{}", String::from_utf8_lossy(&out.stdout));
    Ok(())
}
