//! sparsec facade.
