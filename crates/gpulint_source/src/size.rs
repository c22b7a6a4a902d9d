//! Memory sizes as users write them (`8GiB`, `8GB`) and as messages show them.

/// Parses a memory size: `8GiB`, `8GB`, `8192MiB`, `8 G`, `512M`, `1073741824` (bytes).
/// Binary units (`GiB`, and bare `G`/`M`/`K` as GPU tools use them) are powers of 1024;
/// `GB`/`MB`/`KB` are powers of 1000.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: f64 = num.replace('_', "").parse().map_err(|_| {
        format!(
            "invalid size `{s}`: expected a number with a unit, such as `8GiB`, `8GB` or `8192MiB`"
        )
    })?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "kb" => 1e3,
        "m" | "mib" => 1024f64.powi(2),
        "mb" => 1e6,
        "g" | "gib" => 1024f64.powi(3),
        "gb" => 1e9,
        "t" | "tib" => 1024f64.powi(4),
        "tb" => 1e12,
        other => {
            return Err(format!(
                "invalid size `{s}`: unknown unit `{other}` (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)"
            ))
        }
    };
    let bytes = num * mult;
    if !bytes.is_finite() || !(1.0..=1e15).contains(&bytes) {
        return Err(format!(
            "invalid size `{s}`: must be between 1 byte and 1 PB"
        ));
    }
    Ok(bytes.round() as u64)
}

/// `8589934592` → `8 GiB`, `13.2 GiB`, `512 MiB`.
pub fn format_size(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i < units.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if (v - v.round()).abs() < 0.05 {
        format!("{} {}", v.round() as u64, units[i])
    } else {
        format!("{:.1} {}", v, units[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("8GiB").unwrap(), 8 << 30);
        assert_eq!(parse_size("8GB").unwrap(), 8_000_000_000);
        assert_eq!(parse_size("8192MiB").unwrap(), 8 << 30);
        assert_eq!(parse_size("8 G").unwrap(), 8 << 30);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert!(parse_size("eight").is_err());
        assert!(parse_size("8XB").is_err());
        assert!(parse_size("0GiB").is_err());
        assert_eq!(format_size(8 << 30), "8 GiB");
        assert_eq!(format_size(512 << 20), "512 MiB");
    }
}
