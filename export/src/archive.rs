//! The `.pt2` container: a zip of stored (uncompressed) entries under one top
//! folder, `<name>/archive_format` = `pt2`, `<name>/models/<model>.json`,
//! `<name>/data/weights/...`, `<name>/data/constants/...`.
//!
//! Owns: opening the zip, finding the model's entries, reading one entry with its
//! size checked against a limit before anything is allocated. Must not: interpret
//! the JSON or the tensor bytes (see `schema` and `weights`).

use crate::error::{bail, Error, Result};
use crate::limits::LoadLimits;
use std::io::{Read, Seek};

/// What an archive is read from: a file or bytes in memory.
pub(crate) trait Source: Read + Seek {}
impl<T: Read + Seek> Source for T {}

/// An opened archive.
pub(crate) struct Archive {
    zip: zip::ZipArchive<Box<dyn Source>>,
    /// The top folder with its trailing slash (`gpt2_tiny/`).
    prefix: String,
    /// The model's name (`model` of `models/model.json`).
    pub model: String,
}

impl Archive {
    /// Opens an archive of `len` bytes read from `src`.
    pub fn open(src: Box<dyn Source>, len: u64, limits: &LoadLimits) -> Result<Archive> {
        if len > limits.max_archive_bytes {
            bail!(
                "the file has {len} bytes, over LoadLimits::max_archive_bytes ({})",
                limits.max_archive_bytes
            );
        }
        // Offsets are from the start of the file: a .pt2 holds other zips stored
        // inside it (`data/sample_inputs/*.pt` is a torch.save zip), whose records
        // would mislead the reader's search for a prefix offset.
        let config = zip::read::Config {
            archive_offset: zip::read::ArchiveOffset::Known(0),
        };
        let zip = zip::ZipArchive::with_config(config, src)
            .map_err(|e| Error::new(format!("not a readable zip archive: {e}")))?;
        let mut prefix = None;
        let mut models = Vec::new();
        for name in zip.file_names() {
            let name = name.map_err(|e| Error::new(format!("an entry name is unreadable: {e}")))?;
            if let Some(p) = name.strip_suffix("archive_format") {
                if p.is_empty() || (p.ends_with('/') && p[..p.len() - 1].find('/').is_none()) {
                    prefix.get_or_insert_with(|| p.to_string());
                }
            }
            models.push(name.to_string());
        }
        let Some(prefix) = prefix else {
            bail!("no `archive_format` entry: not a torch.export .pt2 archive");
        };
        let mut names: Vec<String> = models
            .iter()
            .filter_map(|n| n.strip_prefix(&prefix)?.strip_prefix("models/"))
            .filter_map(|n| n.strip_suffix(".json"))
            .filter(|n| !n.contains('/'))
            .map(str::to_string)
            .collect();
        names.sort();
        let model = match names.as_slice() {
            [one] => one.clone(),
            [] => bail!("no `{prefix}models/<name>.json` entry (the ExportedProgram)"),
            many if many.iter().any(|m| m == "model") => "model".to_string(),
            many => bail!(
                "several exported programs ({}) and none named `model`",
                many.join(", ")
            ),
        };
        let mut a = Archive { zip, prefix, model };
        let format = a.read("archive_format", 64)?;
        if format.trim_ascii() != b"pt2" {
            bail!(
                "archive_format is `{}`, not `pt2`",
                String::from_utf8_lossy(&format).trim()
            );
        }
        if let Some(order) = a.read_opt("byteorder", 64)? {
            let order = String::from_utf8_lossy(&order).trim().to_string();
            let host = if cfg!(target_endian = "little") {
                "little"
            } else {
                "big"
            };
            if order != host {
                bail!("byteorder is `{order}`, this machine is {host}-endian");
            }
        }
        Ok(a)
    }

    /// The declared (uncompressed) size of `rel` (under the top folder), if present.
    pub fn size(&mut self, rel: &str) -> Option<u64> {
        let full = format!("{}{rel}", self.prefix);
        self.zip.by_name(&full).ok().map(|f| f.size())
    }

    /// Reads entry `rel`; an entry over `max` bytes is refused before reading.
    pub fn read(&mut self, rel: &str, max: u64) -> Result<Vec<u8>> {
        match self.read_opt(rel, max)? {
            Some(v) => Ok(v),
            None => bail!("entry `{}{rel}` is missing", self.prefix),
        }
    }

    /// [`Archive::read`], `None` when the entry is absent.
    pub fn read_opt(&mut self, rel: &str, max: u64) -> Result<Option<Vec<u8>>> {
        let full = format!("{}{rel}", self.prefix);
        let mut f = match self.zip.by_name(&full) {
            Ok(f) => f,
            Err(zip::result::ZipError::FileNotFound) => return Ok(None),
            Err(e) => bail!("entry `{full}` cannot be read: {e}"),
        };
        let size = f.size();
        if size > max {
            bail!("entry `{full}` has {size} bytes, over the limit of {max}");
        }
        let mut buf = Vec::new();
        buf.try_reserve_exact(size as usize)
            .map_err(|_| Error::new(format!("entry `{full}`: cannot allocate {size} bytes")))?;
        // `take`: a lying local header cannot make the read grow past the size.
        f.by_ref()
            .take(size)
            .read_to_end(&mut buf)
            .map_err(|e| Error::new(format!("entry `{full}` is corrupt or truncated: {e}")))?;
        if buf.len() as u64 != size {
            bail!("entry `{full}` is truncated: {} of {size} bytes", buf.len());
        }
        Ok(Some(buf))
    }
}
