//! Reading files as text: only regular files, size limits, binary detection, lossy UTF-8, a
//! byte-order mark dropped, lone carriage returns read as line ends.

use std::io::Read;
use std::path::Path;

/// Reads a file as text: binary content and oversized files are refused, invalid UTF-8 is
/// decoded with replacement characters.
pub fn read_source(path: &Path, max_size: u64) -> Result<String, String> {
    decode(read_bytes(path, max_size)?)
}

/// Reads a file's bytes, refusing directories, anything that is not a regular file (a FIFO,
/// a socket, a device: opening one could block forever) and files over `max_size`.
pub fn read_bytes(path: &Path, max_size: u64) -> Result<Vec<u8>, String> {
    // `stat` never blocks, opening a FIFO does: look before opening.
    let kind = std::fs::metadata(path)
        .map_err(|e| format!("cannot read it: {}", io_reason(&e)))?
        .file_type();
    if kind.is_dir() {
        return Err("it is a directory".into());
    }
    if !kind.is_file() {
        return Err(format!(
            "it is not a regular file ({})",
            special_kind(&kind)
        ));
    }
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

/// The length of the UTF-8 byte-order mark [`decode`] drops from the start of a file.
pub const BOM_LEN: usize = 3;

/// Does the file's content start with a UTF-8 byte-order mark (which [`decode`] drops, so
/// that offsets in the text are offsets in the file minus [`BOM_LEN`])?
pub fn has_bom(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\xEF\xBB\xBF")
}

/// Text from bytes: `Err` for binary content (a NUL byte), lossy for invalid UTF-8. A UTF-8
/// byte-order mark is dropped (columns and parsers see the text as the editor shows it), and a
/// carriage return not followed by a line feed (old Mac line ends) becomes a line feed, so
/// that lines are counted as editors count them; offsets after the mark are unchanged.
pub fn decode(mut bytes: Vec<u8>) -> Result<String, String> {
    if let Some(at) = memchr::memchr(0, &bytes) {
        return Err(format!("binary content (NUL byte at offset {at})"));
    }
    if has_bom(&bytes) {
        bytes.drain(..BOM_LEN);
    }
    for at in memchr::memchr_iter(b'\r', &bytes).collect::<Vec<_>>() {
        if bytes.get(at + 1) != Some(&b'\n') {
            bytes[at] = b'\n';
        }
    }
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// What a file that is not a regular file is, for messages.
fn special_kind(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
    }
    let _ = kind;
    "a special file"
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::NotFound => "no such file (a broken link?)".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_drops_the_bom_and_reads_lone_cr_as_line_ends() {
        assert_eq!(decode(b"\xEF\xBB\xBFx = 1\n".to_vec()).unwrap(), "x = 1\n");
        assert_eq!(decode(b"a\rb\r\nc\r".to_vec()).unwrap(), "a\nb\r\nc\n");
        assert!(decode(b"a\0b".to_vec()).is_err());
        assert_eq!(decode(b"\xff".to_vec()).unwrap(), "\u{fffd}");
    }

    #[cfg(unix)]
    #[test]
    fn fifos_are_refused_without_opening_them() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("requirements.txt");
        let status = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !status.is_ok_and(|s| s.success()) {
            return; // no mkfifo here
        }
        let err = read_bytes(&fifo, 1 << 20).unwrap_err();
        assert!(err.contains("not a regular file (a FIFO)"), "{err}");
        assert_eq!(
            read_bytes(tmp.path(), 1 << 20).unwrap_err(),
            "it is a directory"
        );
    }
}
