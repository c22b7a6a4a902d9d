//! The rules, one file each. Registered in `crate::registry`, nowhere else.

pub mod cuda;
pub mod python;
pub mod tool;
