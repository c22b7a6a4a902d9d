//! Interval facts: the range of values an integer expression of a kernel can take at a point,
//! with symbolic bounds (`0 <= i <= n - 1` under `if (i < n)`), and what launch sites say about
//! the sizes of buffers and the values of size parameters. Rules ask here whether an index can
//! leave its buffer, and whether 32-bit index arithmetic can overflow.

mod access;
mod culprit;
mod eval;
mod evidence;
mod extent;
mod facts;
mod grid;
mod member;
mod overflow;
mod poly;
mod range;
mod short;
mod width;

pub use access::{Extent, OutOfRange};
pub use culprit::{Culprit, CulpritKind};
pub use eval::{Bound, Point, Range, RangeCx};
pub use evidence::{Evidence, FileEvidence};
pub use extent::{type_range, ParamRanges};
pub use grid::GridCount;
pub use member::MemberOverflow;
pub use overflow::{Overflow, OverflowKind};
pub use poly::Poly;
pub use short::ShortBound;
pub use width::{type_width, Width};
