//! Formatting of generated code: syntax trees (or token streams) -> prettyplease text
//! behind a header, doc comments through placeholders, and building + formatting
//! independent pieces of output on worker threads.
//!
//! Owns: the doc placeholder mechanism, [`append_items`], [`format_items`], [`format_file`],
//! [`format_parts`] (one file formatted as consecutive groups of top-level items) and
//! [`parallel_map`].
//! Must not: decide what is generated (the emitters do) or read/write files.

use std::cell::RefCell;

use proc_macro2::TokenStream;
use quote::ToTokens;

use super::ast;

/// Prefix of the placeholder doc attributes replaced after formatting.
const DOC_MARK: &str = "@@opal-doc:";

thread_local! {
    /// Doc texts of the file being built on this thread, by placeholder index.
    static DOCS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Doc comment for an item. Emitted as a short placeholder attribute and replaced by
/// the text, one `///` line per line, after prettyplease has formatted the file:
/// prettyplease prints doc comments verbatim, so the result is what it would print
/// for the full attributes, without parsing and printing every doc string twice.
///
/// The placeholder refers to this thread's list of docs: the item must be
/// formatted on the thread that built it.
pub(crate) fn doc_attr(text: String) -> syn::Attribute {
    thread_local! {
        /// Placeholder attributes by index: every file numbers its docs from 0, and a
        /// clone costs less than escaping the placeholder string again.
        static MARKS: RefCell<Vec<syn::Attribute>> = const { RefCell::new(Vec::new()) };
    }
    let i = DOCS.with(|d| {
        let mut d = d.borrow_mut();
        d.push(text);
        d.len() - 1
    });
    MARKS.with(|m| {
        let mut m = m.borrow_mut();
        while m.len() <= i {
            let mark = format!(" {DOC_MARK}{}", m.len());
            m.push(ast::attr_doc(&mark));
        }
        m[i].clone()
    })
}

/// [`doc_attr`] as tokens.
pub(crate) fn doc(text: &str) -> TokenStream {
    doc_attr(text.to_string()).into_token_stream()
}

/// Appends `formatted` to `out` with the doc placeholders replaced by `docs`.
fn expand_docs(formatted: &str, docs: &[String], out: &mut String) {
    out.reserve(formatted.len() + docs.iter().map(|d| d.len() + 16).sum::<usize>());
    for line in formatted.lines() {
        let trimmed = line.trim_start();
        let text = trimmed
            .strip_prefix("/// ")
            .and_then(|r| r.strip_prefix(DOC_MARK))
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|i| docs.get(i));
        match text {
            Some(text) => {
                let indent = &line[..line.len() - trimmed.len()];
                for l in text.lines() {
                    out.push_str(indent);
                    out.push_str("///");
                    if !l.is_empty() {
                        out.push(' ');
                        out.push_str(l);
                    }
                    out.push('\n');
                }
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
}

/// Formats top-level items with prettyplease and appends the text (docs expanded) to
/// `out`, consuming this thread's docs. prettyplease ends every top-level item with a
/// forced line break at indentation 0, so formatting a file's items in several calls
/// gives the text of formatting them at once.
pub(crate) fn append_items(items: Vec<syn::Item>, out: &mut String) {
    let docs = DOCS.with(|d| std::mem::take(&mut *d.borrow_mut()));
    let file = syn::File {
        shebang: None,
        attrs: Vec::new(),
        items,
    };
    expand_docs(&prettyplease::unparse(&file), &docs, out);
}

/// Parses top-level items from tokens.
pub(crate) fn parse_items(tokens: TokenStream) -> Result<Vec<syn::Item>, String> {
    syn::parse2::<syn::File>(tokens)
        .map(|f| f.items)
        .map_err(|e| format!("generated code does not parse: {e}"))
}

/// Formats top-level items from tokens (see [`append_items`]).
fn format_into(tokens: TokenStream, out: &mut String) -> Result<(), String> {
    append_items(parse_items(tokens)?, out);
    Ok(())
}

/// Formats one file's items with prettyplease, behind the generated-file header.
pub(crate) fn format_items(header: &str, items: Vec<syn::Item>) -> String {
    let mut out = String::with_capacity(64 * 1024);
    out.push_str(header);
    append_items(items, &mut out);
    out
}

/// Formats one file's tokens with prettyplease, behind the generated-file header.
pub(crate) fn format_file(header: &str, tokens: TokenStream) -> Result<String, String> {
    Ok(format_items(header, parse_items(tokens)?))
}

/// Formats one file made of `parts` consecutive groups of top-level items, where
/// `build(i)` makes the tokens of group `i`; groups are built and formatted on worker
/// threads. prettyplease ends every top-level item with a forced line break at
/// indentation 0, so the concatenation is exactly the text of the whole file.
pub(crate) fn format_parts<F>(header: &str, parts: usize, build: F) -> Result<String, String>
where
    F: Fn(usize) -> TokenStream + Sync,
{
    let texts = parallel_map(parts, |i| {
        let mut s = String::new();
        format_into(build(i), &mut s).map(|()| s)
    });
    let len: usize = texts.iter().flatten().flatten().map(String::len).sum();
    let mut out = String::with_capacity(header.len() + len);
    out.push_str(header);
    for t in texts {
        out.push_str(&t.ok_or("generation failed")??);
    }
    Ok(out)
}

/// `f(0..n)` on rayon's pool, results in index order; `None` for an index whose job
/// panicked (the panic message has been printed by then), so callers can report it
/// as an error. The pool's threads live on between calls, so their allocator arenas
/// stay warm (fresh threads per call cost more in page faults than they saved).
pub(crate) fn parallel_map<T, F>(n: usize, f: F) -> Vec<Option<T>>
where
    T: Send,
    F: Fn(usize) -> T + Sync,
{
    use rayon::prelude::*;
    (0..n)
        .into_par_iter()
        .map(|i| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(i))).ok())
        .collect()
}
