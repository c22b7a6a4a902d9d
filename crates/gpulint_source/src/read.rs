//! Reading files as text: size limits, binary detection, lossy UTF-8, a BOM kept as blanks.

use std::io::Read;
use std::path::Path;

/// Reads a file as text: binary content and oversized files are refused, invalid UTF-8 is
/// decoded with replacement characters.
pub fn read_source(path: &Path, max_size: u64) -> Result<String, String> {
    decode(read_bytes(path, max_size)?)
}

/// Reads a file's bytes, refusing directories and files over `max_size`.
pub fn read_bytes(path: &Path, max_size: u64) -> Result<Vec<u8>, String> {
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read it: {}", io_reason(&e)))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read it: {}", io_reason(&e)))?;
    if meta.is_dir() {
        return Err("it is a directory".into());
    }
    if meta.len() > max_size {
        return Err(format!(
            "it is {} large, over the {} limit",
            crate::format_size(meta.len()),
            crate::format_size(max_size)
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max_size + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {}", io_reason(&e)))?;
    if bytes.len() as u64 > max_size {
        return Err(format!(
            "it is over the {} limit",
            crate::format_size(max_size)
        ));
    }
    Ok(bytes)
}

/// Text from bytes: `Err` for binary content (a NUL byte), lossy for invalid UTF-8.
pub fn decode(bytes: Vec<u8>) -> Result<String, String> {
    if let Some(at) = memchr::memchr(0, &bytes) {
        return Err(format!("binary content (NUL byte at offset {at})"));
    }
    let bytes = match bytes.strip_prefix(b"\xEF\xBB\xBF") {
        // Keep offsets stable: a BOM becomes three spaces' worth of nothing visible.
        Some(_) => {
            let mut b = bytes;
            b[..3].copy_from_slice(b"   ");
            b
        }
        None => bytes,
    };
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::NotFound => "no such file (a broken link?)".into(),
        _ => e.to_string(),
    }
}
