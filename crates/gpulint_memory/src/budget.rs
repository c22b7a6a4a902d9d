//! GPU memory budgets: a table of common cards and their memory.

/// Known cards: (name, memory in GiB as sold, aliases). Names are matched after lowercasing and
/// dropping spaces, dashes, underscores and the words `nvidia`, `geforce`, `tesla`, `quadro`.
const GPUS: &[(&str, f64, &[&str])] = &[
    // Consumer (GeForce).
    ("GTX 1050 Ti", 4.0, &["gtx1050ti"]),
    ("GTX 1060", 6.0, &["gtx1060", "gtx10606gb"]),
    ("GTX 1070", 8.0, &["gtx1070"]),
    ("GTX 1080", 8.0, &["gtx1080"]),
    ("GTX 1080 Ti", 11.0, &["gtx1080ti"]),
    ("GTX 1650", 4.0, &["gtx1650"]),
    ("GTX 1660", 6.0, &["gtx1660", "gtx1660super", "gtx1660ti"]),
    ("RTX 2060", 6.0, &["rtx2060"]),
    ("RTX 2060 Super", 8.0, &["rtx2060super"]),
    ("RTX 2070", 8.0, &["rtx2070", "rtx2070super"]),
    ("RTX 2080", 8.0, &["rtx2080", "rtx2080super"]),
    ("RTX 2080 Ti", 11.0, &["rtx2080ti"]),
    ("Titan RTX", 24.0, &["titanrtx"]),
    ("Titan V", 12.0, &["titanv"]),
    ("Titan Xp", 12.0, &["titanxp"]),
    ("RTX 3050", 8.0, &["rtx3050"]),
    ("RTX 3060", 12.0, &["rtx3060"]),
    ("RTX 3060 Ti", 8.0, &["rtx3060ti"]),
    ("RTX 3070", 8.0, &["rtx3070", "rtx3070ti"]),
    ("RTX 3080", 10.0, &["rtx3080", "rtx308010gb"]),
    ("RTX 3080 12GB", 12.0, &["rtx308012gb"]),
    ("RTX 3080 Ti", 12.0, &["rtx3080ti"]),
    ("RTX 3090", 24.0, &["rtx3090", "rtx3090ti"]),
    ("RTX 4060", 8.0, &["rtx4060"]),
    ("RTX 4060 Ti", 8.0, &["rtx4060ti", "rtx4060ti8gb"]),
    ("RTX 4060 Ti 16GB", 16.0, &["rtx4060ti16gb"]),
    ("RTX 4070", 12.0, &["rtx4070", "rtx4070super", "rtx4070ti"]),
    ("RTX 4070 Ti Super", 16.0, &["rtx4070tisuper"]),
    ("RTX 4080", 16.0, &["rtx4080", "rtx4080super"]),
    ("RTX 4090", 24.0, &["rtx4090"]),
    ("RTX 5070", 12.0, &["rtx5070"]),
    ("RTX 5070 Ti", 16.0, &["rtx5070ti"]),
    ("RTX 5080", 16.0, &["rtx5080"]),
    ("RTX 5090", 32.0, &["rtx5090"]),
    // Workstation.
    ("RTX A4000", 16.0, &["rtxa4000", "a4000"]),
    ("RTX A5000", 24.0, &["rtxa5000", "a5000"]),
    ("RTX A6000", 48.0, &["rtxa6000", "a6000"]),
    ("RTX 6000 Ada", 48.0, &["rtx6000ada"]),
    ("Quadro RTX 8000", 48.0, &["rtx8000"]),
    // Data centre.
    ("K80", 12.0, &["k80"]),
    ("P100 16GB", 16.0, &["p100", "p10016gb"]),
    ("P100 12GB", 12.0, &["p10012gb"]),
    ("V100 16GB", 16.0, &["v100", "v10016gb"]),
    ("V100 32GB", 32.0, &["v10032gb"]),
    ("T4", 16.0, &["t4"]),
    ("A2", 16.0, &["a2"]),
    ("A10", 24.0, &["a10", "a10g"]),
    ("A16", 16.0, &["a16"]),
    ("A30", 24.0, &["a30"]),
    ("A40", 48.0, &["a40"]),
    ("A100 40GB", 40.0, &["a10040gb"]),
    ("A100 80GB", 80.0, &["a10080gb"]),
    ("L4", 24.0, &["l4"]),
    ("L40", 48.0, &["l40", "l40s"]),
    (
        "H100 80GB",
        80.0,
        &["h100", "h10080gb", "h100sxm", "h100pcie"],
    ),
    ("H100 NVL 94GB", 94.0, &["h100nvl", "h10094gb"]),
    ("H200", 141.0, &["h200", "h200141gb"]),
    ("GH200", 96.0, &["gh200"]),
    ("B200", 180.0, &["b200"]),
    ("MI100", 32.0, &["mi100", "instinctmi100"]),
    ("MI210", 64.0, &["mi210", "instinctmi210"]),
    ("MI250X", 128.0, &["mi250x", "instinctmi250x"]),
    ("MI300X", 192.0, &["mi300x", "instinctmi300x"]),
];

/// The cards of `gpulint estimate --max-batch`, with the memory the driver reports as their
/// total (what `nvidia-smi` and `cudaMemGetInfo` show, ECC on where the card has it: less than
/// the marketed size), in MiB. A process gets that less its CUDA context.
pub const MAX_BATCH_CARDS: &[(&str, u64)] = &[
    ("T4 16 GB", 15360),
    ("V100 16 GB", 16160),
    ("V100 32 GB", 32510),
    ("A10 24 GB", 23028),
    ("L4 24 GB", 23034),
    ("RTX 3090 24 GB", 24576),
    ("RTX 4090 24 GB", 24564),
    ("A100 40 GB", 40960),
    ("A100 80 GB", 81920),
    ("H100 80 GB", 81559),
    ("H200 141 GB", 143771),
];

/// Names that need a variant.
const AMBIGUOUS: &[(&str, &str)] = &[("a100", "`a100-40gb` or `a100-80gb`")];

fn normalize(name: &str) -> String {
    let mut s: String = name
        .to_ascii_lowercase()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    for word in ["nvidia", "geforce", "tesla", "quadro", "amd", "radeon"] {
        s = s.replace(word, "");
    }
    s
}

/// Looks a card up: its display name and memory in bytes.
pub fn lookup(name: &str) -> Result<(&'static str, u64), String> {
    let key = normalize(name);
    if let Some((_, which)) = AMBIGUOUS.iter().find(|(k, _)| *k == key) {
        return Err(format!(
            "GPU `{name}` comes in several memory sizes: write {which}"
        ));
    }
    GPUS.iter()
        .find(|(display, _, aliases)| normalize(display) == key || aliases.contains(&key.as_str()))
        .map(|(display, gib, _)| (*display, (*gib * (1u64 << 30) as f64) as u64))
        .ok_or_else(|| {
            let names: Vec<String> = GPUS
                .iter()
                .map(|(d, _, a)| a.first().copied().unwrap_or(d).to_string())
                .collect();
            format!(
                "unknown GPU `{name}`; known: {} (or give the size with `--gpu-memory`)",
                names.join(", ")
            )
        })
}

/// Every card, for documentation: (name, bytes).
pub fn table() -> impl Iterator<Item = (&'static str, u64)> {
    GPUS.iter()
        .map(|(d, gib, _)| (*d, (*gib * (1u64 << 30) as f64) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups() {
        assert_eq!(lookup("rtx3060").unwrap(), ("RTX 3060", 12 << 30));
        assert_eq!(lookup("NVIDIA GeForce RTX 4090").unwrap().1, 24 << 30);
        assert_eq!(lookup("a100-80gb").unwrap().1, 80 << 30);
        assert_eq!(lookup("Tesla T4").unwrap().1, 16 << 30);
        assert!(lookup("a100").unwrap_err().contains("a100-40gb"));
        assert!(lookup("voodoo2").is_err());
    }
}
