//! Whole words' token ids, tokenised once: the host's share of an encode that no layer count
//! shortens.
//!
//! The tokenizers library runs its normaliser, pre-tokeniser and model over every text on every
//! call, and its WordPiece keeps no cache (its BPE does). For the pipelines where a space (or a
//! tab or line break) always ends a word and vanishes (BERT's and MPNet's: per-character
//! normalisers, a pre-tokeniser that splits on whitespace, WordPiece), a text's ids are its
//! special tokens around the concatenation of the ids of its whitespace-separated chunks, each
//! tokenised alone. [`WordCache`]
//! tokenises each distinct chunk once, through the library, and reuses its ids; which pipelines
//! qualify is decided from the tokenizer's own configuration and confirmed on probe texts at
//! load ([`WordCache::build`]). Every id still comes from the library: this is a cache, not a
//! second tokenizer.
//!
//! Memory is bounded: at most [`MAX_WORDS`] chunks of at most [`MAX_WORD_BYTES`] bytes are kept;
//! longer or later chunks are tokenised on every call, as before.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::RwLock;

use tokenizers::utils::parallelism::{
    current_num_threads, get_parallelism, MaybeParallelRefIterator, MaybeParallelSlice,
};
use tokenizers::Tokenizer;

use crate::{Error, Result};

mod qualify;
use qualify::{specials, splits_on_spaces};

/// Most chunks kept (about 120 bytes each with the table: at most ~30 MiB).
pub const MAX_WORDS: usize = 1 << 18;
/// Longest chunk kept, in bytes (longer ones are rare: addresses, numbers, code).
pub const MAX_WORD_BYTES: usize = 48;

type Words = HashMap<Box<str>, Box<[u32]>, ahash::RandomState>;
/// A chunk and its ids.
type Word = (Box<str>, Box<[u32]>);

/// Token ids of whitespace-separated chunks, for tokenizers where a space always ends a word.
#[derive(Debug)]
pub struct WordCache {
    /// The tokenizer without truncation or padding, for words alone (no special tokens).
    words: Tokenizer,
    /// Special tokens before and after a text's words (from the post-processor).
    prefix: Vec<i64>,
    suffix: Vec<i64>,
    /// Most words' tokens in one text (the truncation length less the special tokens).
    room: usize,
    map: RwLock<Words>,
}

/// Texts the cached path must tokenise exactly as the library, or it is not used: punctuation,
/// accents (composed and combining), CJK, control and other whitespace characters, the special
/// tokens in the text, a space before a combining mark, runs of spaces, an empty text.
const PROBES: &[&str] = &[
    "A girl is styling her hair.",
    "  Hello,   world!  It's 3.14 -- (naïve) café déjà-vu?  ",
    "e\u{301}te\u{301} a \u{301}b \u{0308}x",
    "東京は日本の首都です。 中文 测试",
    "tab\there\nnew\rline\u{85}nel\u{a0}nbsp\u{3000}wide\u{200b}zw\u{0}nul",
    "[CLS] x[SEP]y <s> </s> <mask> a<mask>b [MASK] [UNK] <unk> <pad>",
    "supercalifragilisticexpialidocious antidisestablishmentarianism ##ing",
    "",
    "    ",
    "ＦＵＬＬＷＩＤＴＨ ﬁ ẞ İstanbul ΣΊΣΥΦΟΣ",
];

impl WordCache {
    /// A cache for `tokenizer` truncating at `max_length`, or `None` where its pipeline may
    /// join words across a space (byte-level BPE, SentencePiece's `▁`, a `Replace`
    /// normaliser...) or where the probe texts disagree with the library.
    pub fn build(tokenizer: &Tokenizer, max_length: usize) -> Option<WordCache> {
        if !splits_on_spaces(tokenizer) {
            return None;
        }
        let mut words = tokenizer.clone();
        words.with_padding(None);
        words.with_truncation(None).ok()?;
        let (prefix, suffix) = specials(&words)?;
        let room = max_length.checked_sub(prefix.len() + suffix.len())?;
        let cache = WordCache {
            words,
            prefix,
            suffix,
            room,
            map: RwLock::new(Words::default()),
        };
        let direct = tokenizer.encode_batch(PROBES.to_vec(), true).ok()?;
        let cached = cache.encode(PROBES).ok()?;
        let same = direct.iter().zip(&cached).all(|(d, c)| {
            d.get_ids()
                .iter()
                .map(|&i| i64::from(i))
                .eq(c.iter().copied())
        });
        cache.clear();
        same.then_some(cache)
    }

    /// Token ids of each text with its special tokens, truncated to the length given at
    /// [`Self::build`]: the library's ids, the words not seen before tokenised in one batch.
    pub fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<i64>>> {
        {
            // every word kept already (a warm cache): one lookup per word
            let map = self.map.read().unwrap_or_else(|e| e.into_inner());
            let kept = |c: &str| map.get(c).map(|w| Cow::Borrowed(&w[..]));
            let ids: Option<Vec<_>> = texts
                .maybe_par_iter_cond(texts.len() >= PARALLEL_TEXTS)
                .map(|t| self.assemble(t, kept))
                .collect();
            if let Some(ids) = ids {
                return Ok(ids);
            }
        }
        let fresh = self.tokenize_new(texts)?;
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        let word = |c: &str| match map.get(c).or_else(|| fresh.get(c)) {
            Some(w) => Some(Cow::Borrowed(&w[..])),
            // cleared by another thread since `tokenize_new`
            None => self.tokenize_one(c).ok().map(Cow::Owned),
        };
        let ids = texts
            .maybe_par_iter_cond(texts.len() >= PARALLEL_TEXTS)
            .map(|t| self.assemble(t, word))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Error::Tokenizer("a word failed to tokenise alone".into()))?;
        drop(map);
        self.remember(fresh);
        Ok(ids)
    }

    /// One text's ids: the special tokens around its words' ids (from `word`, `None` stops),
    /// cut to [`Self::room`] words' tokens.
    fn assemble<'w>(
        &self,
        text: &str,
        mut word: impl FnMut(&str) -> Option<Cow<'w, [u32]>>,
    ) -> Option<Vec<i64>> {
        let mut ids = self.prefix.clone();
        let end = self.prefix.len() + self.room;
        for chunk in chunks(text) {
            let w = word(chunk)?;
            let take = w.len().min(end - ids.len());
            ids.extend(w[..take].iter().map(|&i| i64::from(i)));
            if take < w.len() {
                break;
            }
        }
        ids.extend_from_slice(&self.suffix);
        Some(ids)
    }

    /// Chunks kept now.
    pub fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether no chunk is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every chunk (for measuring a first encounter of a text set).
    pub fn clear(&self) {
        self.map.write().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// The chunks of `texts` not kept yet, tokenised by the library: joined by spaces into
    /// long texts (one parallel batch; a text's fixed cost paid once per group, not once per
    /// word, and enough groups for every thread: [`group_words`]), each token given back to
    /// the chunk its offsets fall in (group by group, in parallel).
    fn tokenize_new(&self, texts: &[&str]) -> Result<Words> {
        let new = self.unseen(texts);
        let size = group_words(new.len(), threads());
        let groups: Vec<&[&str]> = new.chunks(size).collect();
        let many = groups.len() > 1;
        let joined: Vec<String> = groups
            .maybe_par_iter_cond(many)
            .map(|g| g.join(" "))
            .collect();
        let enc = self
            .words
            .encode_batch(joined.iter().map(String::as_str).collect::<Vec<_>>(), false)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        let pairs: Vec<(&[&str], tokenizers::Encoding)> = groups.into_iter().zip(enc).collect();
        let parts: Vec<Vec<Word>> = pairs
            .maybe_par_iter_cond(many)
            .map(|(group, e)| match split_by_offsets(group, e) {
                Some(ids) => Ok(group.iter().map(|c| Box::from(*c)).zip(ids).collect()),
                // a token outside one word: tokenise this group's words one by one
                None => group
                    .iter()
                    .map(|&c| Ok((c.into(), self.tokenize_one(c)?.into())))
                    .collect(),
            })
            .collect::<Result<_>>()?;
        let mut fresh = Words::with_capacity_and_hasher(new.len(), Default::default());
        fresh.extend(parts.into_iter().flatten());
        Ok(fresh)
    }

    /// The distinct chunks of `texts` not kept yet, in their first appearance's order: each
    /// thread's share of the texts scanned on its own (against the kept words and its own
    /// finds), then the shares' finds merged.
    fn unseen<'t>(&self, texts: &[&'t str]) -> Vec<&'t str> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        let kept: &Words = &map;
        let share = texts.len().div_ceil(threads()).max(SCAN_TEXTS);
        let mut finds: Vec<Vec<&'t str>> = texts
            .maybe_par_chunks_cond(texts.len() > share, share)
            .map(|part| {
                let mut seen = HashSet::<&str, ahash::RandomState>::default();
                part.iter()
                    .flat_map(|t| chunks(t))
                    .filter(|c| !kept.contains_key(*c) && seen.insert(c))
                    .collect()
            })
            .collect();
        drop(map);
        if finds.len() == 1 {
            return finds.pop().unwrap_or_default();
        }
        let mut seen = HashSet::<&str, ahash::RandomState>::default();
        finds
            .into_iter()
            .flatten()
            .filter(|c| seen.insert(c))
            .collect()
    }

    fn tokenize_one(&self, chunk: &str) -> Result<Vec<u32>> {
        let e = self
            .words
            .encode_fast(chunk, false)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        Ok(e.get_ids().to_vec())
    }

    /// Keeps `fresh`'s short chunks while there is room.
    fn remember(&self, fresh: Words) {
        if fresh.is_empty() {
            return;
        }
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        for (chunk, ids) in fresh {
            if map.len() >= MAX_WORDS {
                break;
            }
            if chunk.len() <= MAX_WORD_BYTES {
                map.insert(chunk, ids);
            }
        }
    }
}

/// Texts from which ids are assembled on the tokenizers library's threads (as its own batches
/// are; `TOKENIZERS_PARALLELISM=false` turns both off).
const PARALLEL_TEXTS: usize = 256;

/// The threads the tokenizers library's parallel batches run on (one where its parallelism is
/// off: `TOKENIZERS_PARALLELISM=false`; `RAYON_NUM_THREADS` sets the count).
pub fn threads() -> usize {
    match get_parallelism() {
        true => current_num_threads().max(1),
        false => 1,
    }
}

/// Fewest texts a thread scans for new words in [`WordCache::unseen`] (a smaller share costs
/// more in merging than it saves).
const SCAN_TEXTS: usize = 512;

/// Most words per joined text in [`WordCache::tokenize_new`].
const GROUP_WORDS: usize = 256;
/// Fewest words per joined text (below, a text's fixed cost would weigh).
const MIN_GROUP_WORDS: usize = 32;
/// Joined texts per thread (uneven groups even out across several).
const GROUPS_PER_THREAD: usize = 2;

/// Words per joined text for `new` words on `threads` threads: [`GROUPS_PER_THREAD`] groups a
/// thread where that leaves at least [`MIN_GROUP_WORDS`] words a group, and never more than
/// [`GROUP_WORDS`]. The first block an encode tokenises ahead (STS-B's 256 longest texts)
/// brings 2,276 new words: in groups of 256, 9 groups, so that on a 16-thread machine 7
/// threads idled and the wait was one whole group's.
fn group_words(new: usize, threads: usize) -> usize {
    new.div_ceil(threads.max(1) * GROUPS_PER_THREAD)
        .clamp(MIN_GROUP_WORDS, GROUP_WORDS)
}

/// The ids of each of `group`'s words, from the encoding of the words joined by single spaces
/// (byte offsets): each token goes to the word its offsets lie in; `None` where a token's lie
/// in no one word.
fn split_by_offsets(group: &[&str], e: &tokenizers::Encoding) -> Option<Vec<Box<[u32]>>> {
    let mut starts = Vec::with_capacity(group.len());
    let mut at = 0;
    for w in group {
        starts.push(at);
        at += w.len() + 1;
    }
    let mut ids = vec![Vec::new(); group.len()];
    for (&id, &(start, end)) in e.get_ids().iter().zip(e.get_offsets()) {
        let i = starts.partition_point(|&s| s <= start).checked_sub(1)?;
        if end > starts[i] + group[i].len() {
            return None;
        }
        ids[i].push(id);
    }
    Some(ids.into_iter().map(Vec::into_boxed_slice).collect())
}

/// A text's chunks between ASCII spaces, tabs and line breaks (runs of them give none): the
/// characters every qualifying pipeline turns into a split that vanishes (BERT's normaliser
/// maps `\t\n\r` to spaces; every splitter splits on all three).
fn chunks(text: &str) -> impl Iterator<Item = &str> {
    text.split([' ', '\t', '\n', '\r'])
        .filter(|c| !c.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoding(ids: &[u32], offsets: &[(usize, usize)]) -> tokenizers::Encoding {
        let n = ids.len();
        tokenizers::Encoding::new(
            ids.to_vec(),
            vec![0; n],
            vec![String::new(); n],
            vec![None; n],
            offsets.to_vec(),
            vec![0; n],
            vec![1; n],
            Vec::new(),
            Default::default(),
        )
    }

    /// Enough groups for every thread, within their bounds, covering every word.
    #[test]
    fn new_words_are_grouped_for_every_thread() {
        assert_eq!(group_words(2276, 16), 72);
        assert_eq!(group_words(2276, 2), GROUP_WORDS);
        assert_eq!(group_words(100, 16), MIN_GROUP_WORDS);
        assert_eq!(group_words(0, 16), MIN_GROUP_WORDS);
        assert_eq!(group_words(6393, 0), GROUP_WORDS);
        for (new, threads) in [(2276, 16), (700, 16), (6393, 2), (31, 64)] {
            let size = group_words(new, threads);
            let groups = new.div_ceil(size);
            assert!((MIN_GROUP_WORDS..=GROUP_WORDS).contains(&size));
            assert!(
                groups >= threads.min(new / MIN_GROUP_WORDS),
                "{new} {threads}"
            );
        }
    }

    #[test]
    fn tokens_go_to_the_word_their_offsets_lie_in() {
        // "hair. ab" joined: "hair." = 0..5, "ab" = 6..8
        let e = encoding(&[10, 11, 12, 13], &[(0, 4), (4, 5), (6, 7), (7, 8)]);
        let ids = split_by_offsets(&["hair.", "ab"], &e).unwrap();
        assert_eq!(ids, vec![vec![10, 11].into(), vec![12, 13].into()]);
        // a word without tokens (only characters the normaliser deletes)
        let e = encoding(&[10, 12], &[(0, 1), (4, 5)]);
        let ids = split_by_offsets(&["a", "\u{0}", "b"], &e).unwrap();
        assert_eq!(
            ids,
            vec![vec![10].into(), Vec::new().into(), vec![12].into()]
        );
    }

    #[test]
    fn a_token_across_a_space_or_on_it_is_refused() {
        // across the space between "ab" (0..2) and "cd" (3..5), from the space, before any word
        for offsets in [(1, 4), (2, 5), (2, 3)] {
            let e = encoding(&[10], &[offsets]);
            assert!(split_by_offsets(&["ab", "cd"], &e).is_none(), "{offsets:?}");
        }
    }
}
