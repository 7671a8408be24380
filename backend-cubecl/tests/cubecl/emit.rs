//! Emitted sources.
