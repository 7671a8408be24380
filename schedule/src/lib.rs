//! # sparsec-schedule
//!
//! Schedules for sparsec programs (work in progress).
