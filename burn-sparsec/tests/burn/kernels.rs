//! The shipped kernels: traces equal the schedules written in `schedules.rs`
//! (`SPARSEC_BLESS=1` rewrites them), every kernel builds, and builds are cached.

use crate::schedules;
use burn_sparsec::Kernel;
use std::path::Path;
use std::sync::Arc;

fn dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/kernels"))
}

#[test]
fn traces_are_golden() {
    let bless = std::env::var_os("SPARSEC_BLESS").is_some();
    for (name, sch) in schedules::all(dir()).unwrap() {
        let path = dir().join(format!("{name}.trace.json"));
        let json = sch.trace().to_json() + "\n";
        if bless {
            std::fs::write(&path, &json).unwrap();
        }
        let shipped = std::fs::read_to_string(&path).unwrap();
        assert_eq!(shipped, json, "{name}: kernels/{name}.trace.json is stale (SPARSEC_BLESS=1)");
    }
}

#[test]
fn every_kernel_builds_and_is_cached() {
    for k in Kernel::ALL {
        let f = k.scheduled().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.stage, sparsec_ir::Stage::III, "{}", k.name());
        let a = k.compiled().unwrap_or_else(|e| panic!("{e}"));
        let b = k.compiled().unwrap();
        assert!(Arc::ptr_eq(&a, &b), "{}: compiled twice", k.name());
    }
}
