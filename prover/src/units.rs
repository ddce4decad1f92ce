//! Byte sizes on the command line: `4096`, `256MiB`, `141 GiB`, `1.5T`.

/// Parses a byte count: a plain integer, or a number (decimals allowed) followed by one of the
/// binary suffixes `B`, `K`/`KiB`, `M`/`MiB`, `G`/`GiB`, `T`/`TiB` (case-insensitive, powers of
/// 1024). Decimal-unit spellings (`KB`, `GB`, ...) are rejected as ambiguous.
///
/// # Errors
/// A message naming the text that could not be read.
pub fn parse_bytes(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = (t[..split].trim(), t[split..].trim());
    if num.is_empty() {
        return Err(format!("{text:?}: expected a number of bytes, e.g. 4096, 256MiB or 80GiB"));
    }
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        "t" | "tib" => 40,
        "kb" | "mb" | "gb" | "tb" => {
            return Err(format!(
                "{text:?}: decimal units are ambiguous here; use KiB, MiB, GiB or TiB (powers of 1024)"
            ));
        }
        _ => return Err(format!("{text:?}: unknown unit {unit:?}; use B, KiB, MiB, GiB or TiB")),
    };
    if let Ok(n) = num.parse::<u64>() {
        return n
            .checked_mul(1u64 << shift)
            .and_then(|b| usize::try_from(b).ok())
            .ok_or_else(|| format!("{text:?} is too large"));
    }
    let v: f64 = num.parse().map_err(|_| format!("{text:?}: {num:?} is not a number"))?;
    let bytes = v * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes >= usize::MAX as f64 {
        return Err(format!("{text:?} is too large"));
    }
    Ok(bytes.round() as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_suffixed_sizes() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("256MiB"), Ok(256 << 20));
        assert_eq!(parse_bytes("141 GiB"), Ok(141 << 30));
        assert_eq!(parse_bytes("1.5g"), Ok(3 << 29));
        assert_eq!(parse_bytes("2T"), Ok(2 << 40));
        assert_eq!(parse_bytes("0"), Ok(0));
        for bad in ["", "GiB", "12 GB", "1.2.3G", "12 parsecs", "-5", "99999999999999999999"] {
            assert!(parse_bytes(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse_bytes("12 GB").unwrap_err().contains("GiB"));
    }
}
