//! Rules for Python training code.
