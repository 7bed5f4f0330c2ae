//! Where the values of a `[B, H, L, D]` tensor of queries, keys, values or outputs lie in its
//! buffer, so that the kernels read the heads of a Linear output (`[B, L, H, D]` memory) in
//! place and write their results in the layout the next operation reads:
//!
//! ```math
//! x_{b h i c} = \text{data}\big[\text{offset} + b\, s_B + h\, s_H + i\, s_L + c\big],
//! ```
//!
//! the `D` values of a row contiguous. Shared by attention and RoPE.

/// Sizes of a multi-head attention problem: queries, keys and values `[B, H, L, D]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionDims {
    /// $B$.
    pub batch: usize,
    /// $H$.
    pub heads: usize,
    /// $L$ (queries and keys alike; causal).
    pub len: usize,
    /// $D$, the head dimension.
    pub dim: usize,
}

/// Where a `[B, H, L, D]` tensor's elements lie in its buffer: the offset of element
/// `(0, 0, 0, 0)` and the strides of the batch, head and row axes; the `D` values of a row are
/// contiguous. [`HeadLayout::contiguous`] is `[B, H, L, D]` memory; [`HeadLayout::interleaved`]
/// is `[B, L, H, D]` memory (the heads of a Linear output side by side), read without a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadLayout {
    /// Offset of element `(0, 0, 0, 0)`.
    pub offset: usize,
    /// Stride of the batch axis.
    pub batch: usize,
    /// Stride of the head axis.
    pub head: usize,
    /// Stride of the row (position) axis.
    pub row: usize,
}

impl HeadLayout {
    /// `[B, H, L, D]` in that order.
    #[cfg(test)]
    pub fn contiguous(d: &AttentionDims) -> Self {
        Self {
            offset: 0,
            batch: d.heads * d.len * d.dim,
            head: d.len * d.dim,
            row: d.dim,
        }
    }

    /// `[B, L, H, D]` in memory, indexed as `[B, H, L, D]`.
    pub fn interleaved(d: &AttentionDims) -> Self {
        Self {
            offset: 0,
            batch: d.len * d.heads * d.dim,
            head: d.dim,
            row: d.heads * d.dim,
        }
    }

    /// Offset of row 0 of head `bh = b H + h`.
    #[inline]
    pub(super) fn start(&self, bh: usize, d: &AttentionDims) -> usize {
        self.offset + (bh / d.heads) * self.batch + (bh % d.heads) * self.head
    }

    /// One past the last element a tensor of `d` reaches.
    #[inline]
    pub(super) fn end(&self, d: &AttentionDims) -> usize {
        if d.batch == 0 || d.heads == 0 || d.len == 0 || d.dim == 0 {
            return self.offset;
        }
        self.offset
            + (d.batch - 1) * self.batch
            + (d.heads - 1) * self.head
            + (d.len - 1) * self.row
            + d.dim
    }
}

/// A `[B, H, L, D]` tensor: its buffer and where the elements lie.
#[derive(Debug, Clone, Copy)]
pub struct Heads<'a> {
    /// The buffer.
    pub data: &'a [f32],
    /// The layout of the elements in it.
    pub layout: HeadLayout,
}

impl<'a> Heads<'a> {
    /// A contiguous `[B, H, L, D]` tensor.
    #[cfg(test)]
    pub fn contiguous(data: &'a [f32], d: &AttentionDims) -> Self {
        Self {
            data,
            layout: HeadLayout::contiguous(d),
        }
    }

    /// Row 0 of head `bh` and the row stride.
    #[inline]
    pub(super) fn head(&self, bh: usize, d: &AttentionDims) -> (*const f32, usize) {
        // SAFETY: in bounds, checked by `check` before any head is read.
        (
            unsafe { self.data.as_ptr().add(self.layout.start(bh, d)) },
            self.layout.row,
        )
    }

    #[inline]
    pub(super) fn check(&self, d: &AttentionDims, what: &str) {
        assert!(
            self.layout.end(d) <= self.data.len(),
            "attention: {what} of {} elements does not cover {d:?} at {:?}",
            self.data.len(),
            self.layout
        );
    }
}

/// Row 0 of one head's matrix and its row stride (the `D` values of a row are contiguous).
pub(super) type HeadRows = (*const f32, usize);
/// The same, writable.
pub(super) type HeadRowsMut = (*mut f32, usize);

/// Row `i` of a head as a slice.
///
/// # Safety
/// `ptr + i * stride .. + d` must be in bounds.
#[inline]
pub(super) unsafe fn row<'a>((ptr, stride): HeadRows, i: usize, d: usize) -> &'a [f32] {
    unsafe { std::slice::from_raw_parts(ptr.add(i * stride), d) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two layouts place element `(b, h, i, c)` where `[B, H, L, D]` and `[B, L, H, D]`
    /// memory put it, and a tensor's end is one past its last element.
    #[test]
    fn layouts_place_every_element_once() {
        let d = AttentionDims {
            batch: 2,
            heads: 3,
            len: 5,
            dim: 4,
        };
        let (c, i) = (HeadLayout::contiguous(&d), HeadLayout::interleaved(&d));
        let n = 2 * 3 * 5 * 4;
        let (mut seen_c, mut seen_i) = (vec![false; n], vec![false; n]);
        for b in 0..2 {
            for h in 0..3 {
                for l in 0..5 {
                    for e in 0..4 {
                        let at_c = c.start(b * 3 + h, &d) + l * c.row + e;
                        let at_i = i.start(b * 3 + h, &d) + l * i.row + e;
                        assert_eq!(at_c, ((b * 3 + h) * 5 + l) * 4 + e);
                        assert_eq!(at_i, ((b * 5 + l) * 3 + h) * 4 + e);
                        seen_c[at_c] = true;
                        seen_i[at_i] = true;
                    }
                }
            }
        }
        assert!(seen_c.iter().chain(&seen_i).all(|&s| s));
        assert_eq!((c.end(&d), i.end(&d)), (n, n));
    }

    /// A buffer shorter than its layout is refused before any head is read.
    #[test]
    #[should_panic(expected = "does not cover")]
    fn short_buffer_is_refused() {
        let d = AttentionDims {
            batch: 1,
            heads: 2,
            len: 3,
            dim: 4,
        };
        Heads::contiguous(&[0.0; 23], &d).check(&d, "q");
    }
}
