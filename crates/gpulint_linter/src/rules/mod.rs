//! The rules, one file each. Registered in `crate::registry`, nowhere else.

pub mod cuda;
pub mod manifest;
pub mod python;
pub mod tool;
