//! The `.sptir` text format: a parser (front end) and a printer (back end).
//!
//! Printing then parsing gives back an equal function, and printing is stable; see
//! `docs/language.md` for the language.

mod parse;
mod print;

pub use parse::{parse, parse_func, ParseError, MAX_NESTING};
pub use print::{print_expr, print_func, print_module, print_module_with_comments};
