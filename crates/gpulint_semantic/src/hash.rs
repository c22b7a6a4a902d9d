//! Hash maps and sets with foldhash's hasher. The CUDA and Python models and the memory
//! interpreter key their tables by short names, node ids and paths, for which std's SipHash
//! costs more than the look-up itself. Seeded per process as std's are: nothing may depend on
//! their order.

pub type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
pub type HashSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;
