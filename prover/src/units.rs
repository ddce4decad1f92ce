//! Byte sizes and durations on the command line: `4096`, `256MiB`, `141 GiB`, `1.5T`; `30s`, `10m`.

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

/// Parses a duration: a number (decimals allowed) followed by `ms`, `s`, `m`/`min` or `h`; a plain
/// number is seconds. `0` means "do not wait".
///
/// # Errors
/// A message naming the text that could not be read.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = (t[..split].trim(), t[split..].trim());
    if num.is_empty() {
        return Err(format!("{text:?}: expected a duration, e.g. 30s, 10m, 1.5h or 250ms"));
    }
    let scale = match unit.to_ascii_lowercase().as_str() {
        "ms" => 1e-3,
        "" | "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("{text:?}: unknown unit {unit:?}; use ms, s, m or h")),
    };
    let v: f64 = num.parse().map_err(|_| format!("{text:?}: {num:?} is not a number"))?;
    std::time::Duration::try_from_secs_f64(v * scale).map_err(|_| format!("{text:?} is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durations() {
        use std::time::Duration;
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2 min"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        for bad in ["", "m", "10 parsecs", "-5s", "1.2.3s", "1e999h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse_duration("10 parsecs").unwrap_err().contains("ms, s, m or h"));
    }

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
