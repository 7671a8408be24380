//! MLIR contexts with every dialect, diagnostics capture, verification and pass pipelines.

use crate::error::{MlirError, Result};
use melior::dialect::DialectRegistry;
use melior::ir::operation::OperationLike;
use melior::ir::Module;
use melior::pass::PassManager;
use melior::utility::{parse_pass_pipeline, register_all_dialects, register_all_llvm_translations, register_all_passes};
use melior::Context;
use std::cell::RefCell;
use std::rc::Rc;

/// A context with every upstream dialect loaded and the LLVM translations registered.
pub(crate) fn new_context() -> Context {
    register_all_passes();
    let registry = DialectRegistry::new();
    register_all_dialects(&registry);
    // No MLIR thread pool: worker threads in the process are the OpenMP runtime's.
    let context = Context::new_with_threading(false);
    context.append_dialect_registry(&registry);
    context.load_all_available_dialects();
    register_all_llvm_translations(&context);
    context
}

/// Runs `f` while collecting the context's diagnostics; returns them joined.
fn with_diagnostics<T>(context: &Context, f: impl FnOnce() -> T) -> (T, String) {
    let messages = Rc::new(RefCell::new(Vec::<String>::new()));
    let sink = messages.clone();
    let id = context.attach_diagnostic_handler(move |d| {
        sink.borrow_mut().push(format!("{}: {d}", d.location()));
        true
    });
    let out = f();
    context.detach_diagnostic_handler(id);
    let text = messages.borrow().join("\n");
    (out, text)
}

/// Verifies a module; failure is a compiler bug.
pub(crate) fn verify(context: &Context, module: &Module) -> Result<()> {
    let (ok, diagnostics) = with_diagnostics(context, || module.as_operation().verify());
    if ok {
        Ok(())
    } else {
        Err(MlirError::InvalidModule { diagnostics })
    }
}

/// Runs a textual pass pipeline (`builtin.module(...)`) on a module.
pub(crate) fn run_pipeline(context: &Context, module: &mut Module, pipeline: &str) -> Result<()> {
    let fail = |diagnostics: String| MlirError::Pipeline { pipeline: pipeline.to_string(), diagnostics };
    let pm = PassManager::new(context);
    parse_pass_pipeline(pm.as_operation_pass_manager(), pipeline).map_err(|e| fail(e.to_string()))?;
    let (r, diagnostics) = with_diagnostics(context, || pm.run(module));
    r.map_err(|e| fail(if diagnostics.is_empty() { e.to_string() } else { diagnostics }))
}
