//! The one 64-bit hash of axon: SipHash-1-3 with fixed (zero) keys, from the `siphasher`
//! crate, over bytes axon lays out itself. Every hash that names something (a resource's
//! version, a generated set's digest, the memo key of a name list, a file's text, a shard)
//! is made here.
//!
//! Why not std's `DefaultHasher`: its algorithm is explicitly unspecified and may change in
//! any Rust release, and so may the bytes std's `Hash` impls feed a hasher (a `str` ends
//! with `0xFF` today, a slice starts with its length as a native-endian `usize`). A
//! resource's version and a SotW `version_info` cross replicas and reconnects: two replicas
//! built with different toolchains must give the same resource the same version, or every
//! Envoy that reconnects to the other one is sent everything again. So values that leave the
//! process are hashed through [`StableHasher::write_text`], [`StableHasher::write_bytes`] and
//! the fixed-width integer writes, whose bytes are laid out below and pinned by a test.
//!
//! The byte layout is the one std fed SipHash-1-3 on little-endian machines when axon used
//! `DefaultHasher`, so the versions of earlier builds stay valid across the upgrade.
//!
//! Not for untrusted keys in a `HashMap`: the keys are fixed, so anyone can make collisions.
//!
//! One hash is not made here with it: [`fast_byte_strings`], of a list that never leaves the
//! process nor names anything (a request's resource names, compared with the list the stream
//! had): foldhash, several times faster than SipHash on the long name lists of EDS and RDS
//! requests, whose SipHash was ~4% of a connect storm's CPU.

use std::hash::Hasher;

use siphasher::sip::SipHasher13;

/// A hash of a list of byte strings, for this process only (its value may change with any
/// build): each string's length, then its bytes, through foldhash with a fixed seed. Equal
/// lists hash equally; different ones, all but certainly, differently (a client that crafts
/// a collision only confuses its own stream).
pub fn fast_byte_strings<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    use std::hash::BuildHasher;
    let mut h = foldhash::fast::FixedState::with_seed(0).build_hasher();
    for item in items {
        h.write_usize(item.len());
        h.write(item);
    }
    h.finish()
}

/// A [`Hasher`] whose output is fixed for given input, in every build and on every platform:
/// integers are written as their little-endian bytes (`usize` as a `u64`). Feeding it through
/// a type's `Hash` impl is stable only as far as that impl's bytes are; use
/// [`StableHasher::write_text`] and [`StableHasher::write_bytes`] for strings and byte strings.
#[derive(Debug, Clone)]
pub struct StableHasher(SipHasher13);

impl Default for StableHasher {
    fn default() -> StableHasher {
        StableHasher::new()
    }
}

impl StableHasher {
    pub fn new() -> StableHasher {
        StableHasher(SipHasher13::new_with_keys(0, 0))
    }

    /// A string: its UTF-8 bytes, then `0xFF` (a byte UTF-8 never holds, so a run of texts
    /// cannot be read two ways).
    pub fn write_text(&mut self, text: &str) {
        self.0.write(text.as_bytes());
        self.0.write(&[0xFF]);
    }

    /// A byte string: its length as a little-endian `u64`, then its bytes.
    pub fn write_bytes(&mut self, bytes: &[u8]) {
        self.write_u64(bytes.len() as u64);
        self.0.write(bytes);
    }
}

impl Hasher for StableHasher {
    fn finish(&self) -> u64 {
        self.0.finish()
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }

    fn write_u8(&mut self, i: u8) {
        self.0.write(&[i]);
    }

    fn write_u16(&mut self, i: u16) {
        self.0.write(&i.to_le_bytes());
    }

    fn write_u32(&mut self, i: u32) {
        self.0.write(&i.to_le_bytes());
    }

    fn write_u64(&mut self, i: u64) {
        self.0.write(&i.to_le_bytes());
    }

    fn write_u128(&mut self, i: u128) {
        self.0.write(&i.to_le_bytes());
    }

    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }

    fn write_i8(&mut self, i: i8) {
        self.write_u8(i as u8);
    }

    fn write_i16(&mut self, i: i16) {
        self.write_u16(i as u16);
    }

    fn write_i32(&mut self, i: i32) {
        self.write_u32(i as u32);
    }

    fn write_i64(&mut self, i: i64) {
        self.write_u64(i as u64);
    }

    fn write_i128(&mut self, i: i128) {
        self.write_u128(i as u128);
    }

    fn write_isize(&mut self, i: isize) {
        self.write_u64(i as u64);
    }
}

/// The hash of one string ([`StableHasher::write_text`]).
pub fn hash_text(text: &str) -> u64 {
    let mut h = StableHasher::new();
    h.write_text(text);
    h.finish()
}

/// The hash of one byte string ([`StableHasher::write_bytes`]).
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = StableHasher::new();
    h.write_bytes(bytes);
    h.finish()
}

/// The hash of a list of strings in order: their count (a little-endian `u64`), then each
/// ([`StableHasher::write_text`]).
pub fn hash_texts<S: AsRef<str>>(texts: impl ExactSizeIterator<Item = S>) -> u64 {
    let mut h = StableHasher::new();
    h.write_u64(texts.len() as u64);
    for text in texts {
        h.write_text(text.as_ref());
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_byte_strings_tells_lists_apart() {
        let h = |items: &[&str]| fast_byte_strings(items.iter().map(|s| s.as_bytes()));
        assert_eq!(h(&["a", "b"]), h(&["a", "b"]));
        assert_ne!(h(&["a", "b"]), h(&["b", "a"]));
        assert_ne!(h(&["a", "b"]), h(&["ab"]));
        assert_ne!(h(&["a", "", "b"]), h(&["a", "b"]));
        assert_ne!(h(&[]), h(&[""]));
        let long = "outbound|8080||svc-0042.ns-7.svc.cluster.local".repeat(3);
        assert_ne!(h(&[&long, "x"]), h(&[&long, "y"]));
    }

    /// These values are what every replica, of every build, must compute: a change here is a
    /// change of every version axon sends, and replicas of the old and new build would
    /// disagree. Do not update them to make the test pass. (They are also what
    /// `DefaultHasher` gave for the same bytes with Rust 1.95 on x86_64: the builds before
    /// this helper sent the same versions.)
    #[test]
    fn the_hashes_are_pinned() {
        assert_eq!(hash_text(""), 0x3040_6ea5_23c5_3def);
        assert_eq!(
            hash_text("outbound|80||a.default.svc.cluster.local"),
            0xe2e6_3b35_b14e_99ef
        );
        assert_eq!(hash_bytes(b""), 0xbd60_acb6_58c7_9e45);
        assert_eq!(hash_bytes(b"\x0a\x03abc"), 0x0fa8_3ebe_70aa_3bc0);
        assert_eq!(hash_texts(["a", "b"].iter()), 0x12fd_23af_eb13_a092);
        let mut h = StableHasher::new();
        h.write_text("b");
        h.write_u64(0x0123_4567_89ab_cdef);
        assert_eq!(h.finish(), 0x12da_06d0_3264_b2c9);
    }

    #[test]
    fn integers_are_little_endian_bytes() {
        let mut a = StableHasher::new();
        a.write_u32(0x0403_0201);
        a.write_usize(5);
        let mut b = StableHasher::new();
        b.write(&[1, 2, 3, 4]);
        b.write(&5u64.to_le_bytes());
        assert_eq!(a.finish(), b.finish());
    }

    #[test]
    fn texts_are_delimited() {
        assert_ne!(
            hash_texts(["ab", "c"].iter()),
            hash_texts(["a", "bc"].iter())
        );
        assert_ne!(hash_bytes(b"ab"), hash_text("ab"));
    }
}
