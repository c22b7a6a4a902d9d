//! The parts of a notebook's JSON that the code cells need, read without building the rest: cell
//! outputs and attachments (often megabytes of base64 images) are skipped as they are scanned,
//! so a notebook costs little more than its text while it is read.

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::fmt;

/// The `visit_*` methods of a visitor that reads any JSON scalar as `$value`.
macro_rules! forward_scalars {
    ($value:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
}

/// The top level: the `cells` field, if it is a list, and the `metadata` object.
#[derive(Default)]
pub(super) struct Raw {
    /// `None` when there is no `cells` field or it is not a list.
    pub cells: Option<Vec<RawCell>>,
    pub metadata: Option<Value>,
}

/// One element of `cells`: its `cell_type` and `source` (anything else is skipped). An element
/// that is not an object has neither.
#[derive(Default)]
pub(super) struct RawCell {
    pub cell_type: Option<Value>,
    pub source: Option<Value>,
}

impl Raw {
    /// The notebook's kernel language, where its metadata names one.
    pub fn language(&self) -> Option<&str> {
        let m = self.metadata.as_ref()?;
        m.pointer("/kernelspec/language")
            .or_else(|| m.pointer("/language_info/name"))
            .and_then(Value::as_str)
    }
}

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Top;
        impl<'de> Visitor<'de> for Top {
            type Value = Raw;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
                let mut raw = Raw::default();
                // A repeated key keeps its last value, as a JSON object read whole would.
                while let Some(key) = map.next_key::<KeyName>()? {
                    match key.0.as_deref() {
                        Some("cells") => raw.cells = map.next_value::<Cells>()?.0,
                        Some("metadata") => raw.metadata = Some(map.next_value()?),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(raw)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Raw::default())
            }
            forward_scalars!(Raw::default());
        }
        d.deserialize_any(Top)
    }
}

/// A `cells` field: the list, or `None` for any other value.
struct Cells(Option<Vec<RawCell>>);

impl<'de> Deserialize<'de> for Cells {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Cells;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Cells, A::Error> {
                let mut cells = Vec::new();
                while let Some(cell) = seq.next_element::<RawCell>()? {
                    cells.push(cell);
                }
                Ok(Cells(Some(cells)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Cells, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Cells(None))
            }
            forward_scalars!(Cells(None));
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for RawCell {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawCell;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawCell, A::Error> {
                let mut cell = RawCell::default();
                while let Some(key) = map.next_key::<KeyName>()? {
                    match key.0.as_deref() {
                        Some("cell_type") => cell.cell_type = Some(map.next_value()?),
                        Some("source") => cell.source = Some(map.next_value()?),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(cell)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawCell, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(RawCell::default())
            }
            forward_scalars!(RawCell::default());
        }
        d.deserialize_any(V)
    }
}

/// An object key, kept only when it is one of the few names read (`None` otherwise), so that the
/// keys of skipped fields are not copied.
struct KeyName(Option<String>);

impl<'de> Deserialize<'de> for KeyName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = KeyName;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<KeyName, E> {
                const READ: &[&str] = &["cells", "metadata", "cell_type", "source"];
                Ok(KeyName(READ.contains(&s).then(|| s.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}
