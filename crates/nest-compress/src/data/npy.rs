//! A `.npy` file's header, read before the array is: its shape against the data it holds
//! (a damaged or hostile header could otherwise ask for terabytes), and what it holds when
//! that is not a 2-D float array.

use std::path::Path;

use crate::{Error, Result};

/// Checks that a `.npy` file holds as many data bytes as its header's shape says, before
/// anything is allocated (a damaged or hostile header could otherwise ask for terabytes).
/// Headers this does not understand are left to the reader, which refuses them.
pub(super) fn check_npy_size(path: &Path) -> Result<()> {
    use std::io::Read as _;
    let file_len = std::fs::metadata(path)
        .map_err(|e| Error::input(path, format!("cannot read: {e}")))?
        .len();
    let mut head = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(65_536).read_to_end(&mut head))
        .map_err(|e| Error::input(path, format!("cannot read: {e}")))?;
    let Some((offset, header)) = npy_header(&head) else {
        // (the npy reader said "failed to fill whole buffer" of an empty file: helper trial E)
        return Err(Error::input(
            path,
            format!("not a .npy file: no NumPy header in its {file_len} bytes"),
        ));
    };
    let item: u64 = if header.contains("f4") {
        4
    } else if header.contains("f8") {
        8
    } else {
        return Ok(());
    };
    let Some(shape) = header
        .split("'shape':")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .map(|s| s.trim().trim_start_matches('('))
    else {
        return Ok(());
    };
    let rank = shape.split(',').filter(|d| !d.trim().is_empty()).count();
    if rank != 2 {
        // (the npy reader named the dtype of a 1-D float32 array as what was wrong)
        return Err(Error::input(
            path,
            format!(
                "holds a {rank}-D array (shape ({shape})): expected a 2-D float32 or float64 \
                 array, one row per text"
            ),
        ));
    }
    let need = shape
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .try_fold(item, |acc, d| {
            d.parse::<u64>().ok().and_then(|d| acc.checked_mul(d))
        });
    let have = file_len.saturating_sub(offset);
    match need {
        Some(n) if n == have => Ok(()),
        Some(n) => Err(Error::input(
            path,
            format!("the header's shape ({shape}) needs {n} bytes of data, the file has {have}"),
        )),
        None => Err(Error::input(
            path,
            format!("the header's shape ({shape}) is not a list of sizes that fit in 64 bits"),
        )),
    }
}

/// `(data offset, header text)` of a `.npy` file's first bytes (format versions 1-3).
fn npy_header(head: &[u8]) -> Option<(u64, String)> {
    if head.len() < 10 || &head[..6] != b"\x93NUMPY" {
        return None;
    }
    let (len, start): (usize, usize) = match head[6] {
        1 => (u16::from_le_bytes([head[8], head[9]]) as usize, 10),
        2 | 3 if head.len() >= 12 => (
            u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize,
            12,
        ),
        _ => return None,
    };
    let text = head.get(start..start.checked_add(len)?)?;
    Some((
        (start + len) as u64,
        String::from_utf8_lossy(text).into_owned(),
    ))
}
