//! Just enough WAV: a header for 16-bit PCM, and the PCM of a WAV file (espeak-ng's output), so
//! the pieces of chunked speech are joined as samples, not as files.

use toolgate_core::ToolError;

/// 16-bit signed little-endian PCM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PcmFormat {
    pub(crate) rate: u32,
    pub(crate) channels: u16,
}

/// A WAV file of `pcm`.
pub(crate) fn wrap(pcm: &[u8], format: PcmFormat) -> Result<Vec<u8>, ToolError> {
    let data_len = u32::try_from(pcm.len())
        .ok()
        .filter(|n| *n <= u32::MAX - 36)
        .ok_or_else(|| ToolError::failed("the audio is too long for one WAV file"))?;
    let block = format.channels * 2;
    let mut out = Vec::with_capacity(pcm.len() + 44);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&format.channels.to_le_bytes());
    out.extend_from_slice(&format.rate.to_le_bytes());
    out.extend_from_slice(&(format.rate * u32::from(block)).to_le_bytes());
    out.extend_from_slice(&block.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    out.extend_from_slice(pcm);
    Ok(out)
}

/// The format and samples of a 16-bit PCM WAV file. espeak-ng writes a data size of 0x7fffffff
/// when it streams, so the data runs to the end of the file whatever the header says.
pub(crate) fn unwrap(bytes: &[u8]) -> Result<(PcmFormat, &[u8]), ToolError> {
    let bad = |why: &str| ToolError::failed(format!("the speech program's WAV output is not usable: {why}"));
    if bytes.len() < 12 || &bytes[0..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return Err(bad("not a RIFF/WAVE file"));
    }
    let mut at = 12;
    let mut format = None;
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let len = u32::from_le_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]) as usize;
        let body = at + 8;
        if id == b"fmt " {
            let f = bytes.get(body..body + 16).ok_or_else(|| bad("short fmt chunk"))?;
            let (tag, channels) = (u16::from_le_bytes([f[0], f[1]]), u16::from_le_bytes([f[2], f[3]]));
            let rate = u32::from_le_bytes([f[4], f[5], f[6], f[7]]);
            let bits = u16::from_le_bytes([f[14], f[15]]);
            if tag != 1 || bits != 16 || channels == 0 {
                return Err(bad("not 16-bit PCM"));
            }
            format = Some(PcmFormat { rate, channels });
        } else if id == b"data" {
            let format = format.ok_or_else(|| bad("data before fmt"))?;
            let end = body.saturating_add(len).min(bytes.len());
            return Ok((format, &bytes[body..end]));
        }
        at = body.saturating_add(len).saturating_add(len & 1);
    }
    Err(bad("no data chunk"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let f = PcmFormat { rate: 22050, channels: 1 };
        let pcm = [1u8, 0, 2, 0, 3, 0];
        let wav = wrap(&pcm, f).expect("wrap");
        assert_eq!(unwrap(&wav).map(|(g, d)| (g, d.to_vec())).ok(), Some((f, pcm.to_vec())));
        assert!(unwrap(b"RIFF....WAVEjunk").is_err());
    }
}
