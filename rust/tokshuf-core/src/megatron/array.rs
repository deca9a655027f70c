//! The index arrays (int16/int32/uint32/int64, 1-D or `[n, 2]`), held in memory or mapped from a
//! `.npy` file, with a uniform read view for the hot loops.

use std::sync::Arc;

use crate::indexed::Mapping;

/// Element types of Megatron's index arrays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElemType {
    /// `dataset_index`
    I16,
    /// `document_index`, `sample_index` (small)
    I32,
    /// `shuffle_index` (small)
    U32,
    /// everything that can exceed 2^31
    I64,
}

impl ElemType {
    pub const ALL: [ElemType; 4] = [ElemType::I16, ElemType::I32, ElemType::U32, ElemType::I64];

    pub fn name(self) -> &'static str {
        match self {
            ElemType::I16 => "int16",
            ElemType::I32 => "int32",
            ElemType::U32 => "uint32",
            ElemType::I64 => "int64",
        }
    }

    /// The little-endian `.npy` descr (`'<i4'`).
    pub fn descr(self) -> &'static str {
        match self {
            ElemType::I16 => "<i2",
            ElemType::I32 => "<i4",
            ElemType::U32 => "<u4",
            ElemType::I64 => "<i8",
        }
    }

    pub fn itemsize(self) -> usize {
        match self {
            ElemType::I16 => 2,
            ElemType::I32 | ElemType::U32 => 4,
            ElemType::I64 => 8,
        }
    }

    /// The type for a descr, accepting `|`/`=` byte orders numpy writes for some types.
    pub fn from_descr(descr: &str) -> Option<ElemType> {
        let d = descr.trim_start_matches(['<', '|', '=']);
        ElemType::ALL.into_iter().find(|t| &t.descr()[1..] == d)
    }
}

/// Owned element storage (typed, so it is aligned for its element type).
#[derive(Debug)]
pub enum Owned {
    I16(Vec<i16>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    I64(Vec<i64>),
}

impl Owned {
    fn elem(&self) -> ElemType {
        match self {
            Owned::I16(_) => ElemType::I16,
            Owned::I32(_) => ElemType::I32,
            Owned::U32(_) => ElemType::U32,
            Owned::I64(_) => ElemType::I64,
        }
    }

    fn len(&self) -> usize {
        self.bytes().len() / self.elem().itemsize()
    }

    fn bytes(&self) -> &[u8] {
        fn raw<T>(v: &[T]) -> &[u8] {
            // SAFETY: only instantiated with primitive integers below: no padding, every byte
            // initialized, and u8 has alignment 1; the length is the slice's size in bytes.
            unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
        }
        match self {
            Owned::I16(v) => raw(v),
            Owned::I32(v) => raw(v),
            Owned::U32(v) => raw(v),
            Owned::I64(v) => raw(v),
        }
    }
}

#[derive(Debug, Clone)]
enum Storage {
    Owned(Arc<Owned>),
    Mapped { map: Mapping, offset: usize },
}

/// A read-only index array: element type, shape, and its bytes (owned or mapped).
#[derive(Debug, Clone)]
pub struct IndexArray {
    elem: ElemType,
    shape: Vec<usize>,
    storage: Storage,
}

/// A typed view for reading elements as `i64` (the enum is matched once per access; the
/// branch is perfectly predictable within a loop).
#[derive(Debug, Clone, Copy)]
pub enum IndexView<'a> {
    I16(&'a [i16]),
    I32(&'a [i32]),
    U32(&'a [u32]),
    I64(&'a [i64]),
}

impl IndexView<'_> {
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            IndexView::I16(v) => v.len(),
            IndexView::I32(v) => v.len(),
            IndexView::U32(v) => v.len(),
            IndexView::I64(v) => v.len(),
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` widened to `i64`, or `None` past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<i64> {
        match self {
            IndexView::I16(v) => v.get(i).map(|&x| i64::from(x)),
            IndexView::I32(v) => v.get(i).map(|&x| i64::from(x)),
            IndexView::U32(v) => v.get(i).map(|&x| i64::from(x)),
            IndexView::I64(v) => v.get(i).copied(),
        }
    }

    /// All elements widened (for tests and small arrays).
    pub fn to_vec(&self) -> Vec<i64> {
        (0..self.len()).filter_map(|i| self.get(i)).collect()
    }
}

impl IndexArray {
    fn owned(data: Owned, shape: Vec<usize>) -> Self {
        debug_assert_eq!(shape.iter().product::<usize>(), data.len());
        IndexArray { elem: data.elem(), shape, storage: Storage::Owned(Arc::new(data)) }
    }

    /// A 1-D array from owned data.
    pub fn from_owned(data: Owned) -> Self {
        let n = data.len();
        Self::owned(data, vec![n])
    }

    /// An `[n, 2]` array from owned, row-major data of even length.
    pub fn pairs(data: Owned) -> Self {
        let n = data.len();
        assert!(n.is_multiple_of(2), "pairs need an even number of elements");
        Self::owned(data, vec![n / 2, 2])
    }

    /// An array of the given shape over owned data (the element count must match the shape).
    pub fn with_shape(data: Owned, shape: Vec<usize>) -> Option<Self> {
        (shape.iter().product::<usize>() == data.len()).then(|| Self::owned(data, shape))
    }

    /// An array over `count` elements of a mapping starting at byte `offset`; `None` if out of
    /// bounds or misaligned for the element type.
    pub fn mapped(map: Mapping, offset: usize, elem: ElemType, shape: Vec<usize>) -> Option<Self> {
        let count = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
        let end = count.checked_mul(elem.itemsize())?.checked_add(offset)?;
        let bytes = map.bytes();
        if end > bytes.len() || !(bytes.as_ptr() as usize + offset).is_multiple_of(elem.itemsize()) {
            return None;
        }
        Some(IndexArray { elem, shape, storage: Storage::Mapped { map, offset } })
    }

    pub fn elem(&self) -> ElemType {
        self.elem
    }

    /// Shape (1-D, or `[rows, 2]`).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the data is mapped from a file (rather than held in memory).
    pub fn is_mapped(&self) -> bool {
        matches!(self.storage, Storage::Mapped { .. })
    }

    /// The raw little-endian bytes.
    pub fn bytes(&self) -> &[u8] {
        match &self.storage {
            Storage::Owned(o) => o.bytes(),
            Storage::Mapped { map, offset } => &map.bytes()[*offset..*offset + self.len() * self.elem.itemsize()],
        }
    }

    pub fn view(&self) -> IndexView<'_> {
        let (b, n) = (self.bytes(), self.len());
        fn cast<T>(b: &[u8], n: usize) -> &[T] {
            debug_assert_eq!(b.len(), n * std::mem::size_of::<T>());
            debug_assert_eq!(b.as_ptr() as usize % std::mem::align_of::<T>(), 0);
            // SAFETY: the bytes of a vector of T, or a range of a mapping that `mapped` checked
            // lies in it and is aligned for T; T is a primitive integer, valid for every bit
            // pattern; the data is immutable and outlives the returned borrow of `self`.
            unsafe { std::slice::from_raw_parts(b.as_ptr().cast::<T>(), n) }
        }
        match self.elem {
            ElemType::I16 => IndexView::I16(cast(b, n)),
            ElemType::I32 => IndexView::I32(cast(b, n)),
            ElemType::U32 => IndexView::U32(cast(b, n)),
            ElemType::I64 => IndexView::I64(cast(b, n)),
        }
    }
}
