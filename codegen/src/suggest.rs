//! "Did you mean ...?": the one rule every diagnostic uses to suggest a known word
//! for an unknown one (an operator, a key, a type, a dispatch key, a helper).
//!
//! Owns: the distance and how close a candidate must be. Must not: build
//! diagnostics or know any vocabulary (callers pass their candidates).

/// The candidate closest to `word`, if it is close enough to be what was meant:
/// at most one edit for words of up to three characters (so `qr` suggests nothing
/// rather than `erf`), else at most a third of the word's length and at least two.
/// A swap of two neighbouring characters counts as one edit (`rleu` -> `relu`).
/// Ties go to the candidate that sorts first, so hints are deterministic.
pub fn closest<'c>(word: &str, candidates: impl IntoIterator<Item = &'c str>) -> Option<&'c str> {
    let len = word.chars().count();
    let limit = if len <= 3 { 1 } else { (len / 3).max(2) };
    candidates
        .into_iter()
        // The distance is at least the difference in length: most candidates of a
        // large vocabulary are ruled out without computing it.
        .filter(|c| c.chars().count().abs_diff(len) <= limit)
        .map(|c| (distance(word, c), c))
        .filter(|&(d, c)| d <= limit && c != word)
        .min()
        .map(|(_, c)| c)
}

/// `did you mean `x`?` for [`closest`].
pub fn did_you_mean<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<String> {
    closest(word, candidates).map(|c| format!("did you mean `{c}`?"))
}

/// Edit distance counting insertions, deletions, substitutions and swaps of
/// neighbouring characters (optimal string alignment).
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows: the one two back is needed for swaps.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (prev[j - 1] + cost).min(prev[j] + 1).min(cur[j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            cur[j] = d;
        }
        std::mem::swap(&mut before, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("", ""), 0);
        assert_eq!(distance("relu", "relu"), 0);
        assert_eq!(distance("rleu", "relu"), 1);
        assert_eq!(distance("Tensr", "Tensor"), 1);
        assert_eq!(distance("qr", "erf"), 2);
        assert_eq!(distance("kitten", "sitting"), 3);
    }

    #[test]
    fn short_words_need_a_close_match() {
        let ops = ["erf", "exp", "relu", "add.out", "addmm"];
        assert_eq!(closest("qr", ops), None);
        assert_eq!(closest("ep", ops), Some("exp"));
        assert_eq!(closest("xy", ops), None);
        assert_eq!(closest("exq", ops), Some("exp"));
        assert_eq!(closest("rleu", ops), Some("relu"));
        assert_eq!(closest("add.ot", ops), Some("add.out"));
        assert_eq!(closest("relu", ops), None, "the word itself is no hint");
        assert_eq!(
            did_you_mean("addm", ops).as_deref(),
            Some("did you mean `addmm`?")
        );
    }

    #[test]
    fn ties_are_deterministic() {
        assert_eq!(closest("ab", ["ac", "aa"]), Some("aa"));
        assert_eq!(closest("ab", ["aa", "ac"]), Some("aa"));
    }
}
