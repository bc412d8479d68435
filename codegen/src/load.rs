//! The library's front door: read a `native_functions.yaml` (and its `tags.yaml`),
//! parse, validate, and return the model or every problem found.
//!
//! Owns: file reading and orchestration of `parse` + `validate`. Must not: contain
//! rules of its own.

use std::path::Path;

use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::model::{Loc, NativeFunctions};
use crate::parse;
use crate::validate;

/// Loads `path`, using a `tags.yaml` beside it when there is one.
pub fn load(path: impl AsRef<Path>) -> Result<NativeFunctions, Diagnostics> {
    let path = path.as_ref();
    let beside = path.with_file_name("tags.yaml");
    load_with_tags(path, beside.is_file().then_some(beside.as_path()))
}

/// The bytes of `path`, or a located "cannot read the file" diagnostic.
pub(crate) fn read(path: &Path) -> Result<Vec<u8>, Diagnostics> {
    std::fs::read(path).map_err(|e| {
        let mut d = Diagnostics::new(path.display().to_string(), "");
        d.push(
            Diagnostic::new(
                "opal::io",
                Loc::SYNTHETIC,
                format!("cannot read the file: {e}"),
            )
            .hint("check the path"),
        );
        d
    })
}

/// Reads `path` as UTF-8 text and hands it, with the name messages show, to
/// `load`; an unreadable file or invalid UTF-8 is a located diagnostic.
pub(crate) fn with_text<T>(
    path: &Path,
    load: impl FnOnce(&str, &str) -> Result<T, Diagnostics>,
) -> Result<T, Diagnostics> {
    let name = path.display().to_string();
    let bytes = read(path)?;
    match crate::parse::decode(&bytes) {
        Ok(src) => load(src, &name),
        Err(e) => {
            let mut d = Diagnostics::new(name, String::from_utf8_lossy(&bytes).into_owned());
            d.push(e);
            Err(d)
        }
    }
}

/// Loads `path` with the tags of `tags` (`None`: tags are not checked).
pub fn load_with_tags(path: &Path, tags: Option<&Path>) -> Result<NativeFunctions, Diagnostics> {
    let tag_names = match tags {
        Some(t) => Some(load_tags_bytes(&read(t)?, &t.display().to_string())?),
        None => None,
    };
    let bytes = read(path)?;
    load_bytes(&bytes, &path.display().to_string(), tag_names.as_deref())
}

/// Reads the tag names of a `tags.yaml`'s bytes.
pub fn load_tags_bytes(bytes: &[u8], path: &str) -> Result<Vec<String>, Diagnostics> {
    let src = match parse::decode(bytes) {
        Ok(s) => s,
        Err(e) => {
            let mut d = Diagnostics::new(path, String::from_utf8_lossy(bytes).into_owned());
            d.push(e);
            return Err(d);
        }
    };
    parse::parse_tags(src).map_err(|errs| {
        let mut d = Diagnostics::new(path, src);
        errs.into_iter().for_each(|e| d.push(e));
        d
    })
}

/// Loads a file's bytes; `path` is only used in messages.
pub fn load_bytes(
    bytes: &[u8],
    path: &str,
    tags: Option<&[String]>,
) -> Result<NativeFunctions, Diagnostics> {
    match parse::decode(bytes) {
        Ok(src) => load_str(src, path, tags),
        Err(e) => {
            let mut d = Diagnostics::new(path, String::from_utf8_lossy(bytes).into_owned());
            d.push(e);
            Err(d)
        }
    }
}

/// Loads YAML text; `path` is only used in messages, `tags` are the names from
/// `tags.yaml` (`None`: tags are not checked and none are added automatically).
pub fn load_str(
    src: &str,
    path: &str,
    tags: Option<&[String]>,
) -> Result<NativeFunctions, Diagnostics> {
    // The rules on single functions run as each is parsed, on the parsing threads;
    // the rules between functions and autogen after.
    let checked =
        parse::parse_native_yaml_checked(src, |f, e| validate::check_function(f, tags, e));
    let mut errs = checked.parsed.errors;
    errs.extend(checked.check_errors);
    let model = validate::complete(checked.parsed.functions, &checked.results, tags, &mut errs);
    Diagnostics::or_ok(model, errs, path, src)
}
