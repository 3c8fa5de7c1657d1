//! A bounds-checked reader over a `Bytes` buffer: every read is a `Result`, none can panic.

use bytes::{Buf, Bytes};

use crate::client::error::{Error, Result};

/// Reads big-endian integers, zig-zag varints and length-prefixed slices from a buffer.
#[derive(Debug, Clone)]
pub struct Cursor {
    buf: Bytes,
}

macro_rules! fixed {
    ($name:ident, $ty:ty, $get:ident) => {
        pub fn $name(&mut self) -> Result<$ty> {
            self.need(size_of::<$ty>())?;
            Ok(self.buf.$get())
        }
    };
}

#[allow(missing_docs)]
impl Cursor {
    pub fn new(buf: Bytes) -> Self {
        Cursor { buf }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    fn need(&self, n: usize) -> Result<()> {
        if self.buf.len() < n {
            Err(Error::protocol(format_args!(
                "record data truncated: needed {n} bytes, {} left",
                self.buf.len()
            )))
        } else {
            Ok(())
        }
    }

    fixed!(i8, i8, get_i8);
    fixed!(i16, i16, get_i16);
    fixed!(i32, i32, get_i32);
    fixed!(i64, i64, get_i64);
    fixed!(u32, u32, get_u32);

    pub fn take(&mut self, n: usize) -> Result<Bytes> {
        self.need(n)?;
        Ok(self.buf.split_to(n))
    }

    pub fn skip(&mut self, n: usize) -> Result<()> {
        self.need(n)?;
        self.buf.advance(n);
        Ok(())
    }

    pub fn rest(self) -> Bytes {
        self.buf
    }

    pub fn varlong(&mut self) -> Result<i64> {
        // Read from the slice and advance once: a record has seven varints, most of one byte.
        if let Some(&b) = self.buf.first()
            && b & 0x80 == 0
        {
            self.buf.advance(1);
            return Ok(i64::from(b >> 1) ^ -i64::from(b & 1));
        }
        let mut z: u64 = 0;
        for (i, &b) in self.buf.iter().take(10).enumerate() {
            z |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                self.buf.advance(i + 1);
                return Ok(((z >> 1) as i64) ^ -((z & 1) as i64));
            }
        }
        if self.buf.len() < 10 {
            // Truncated: the error reading one byte past the end gives.
            self.buf.advance(self.buf.len());
            self.need(1)?;
        }
        Err(Error::protocol("varlong longer than 10 bytes"))
    }

    pub fn varint(&mut self) -> Result<i32> {
        let v = self.varlong()?;
        i32::try_from(v).map_err(|_| Error::protocol(format_args!("varint {v} out of range")))
    }

    /// A varint length followed by that many bytes; `-1` is null.
    pub fn nullable_bytes(&mut self) -> Result<Option<Bytes>> {
        match self.varint()? {
            -1 => Ok(None),
            n if n >= 0 => self.take(n as usize).map(Some),
            n => Err(Error::protocol(format_args!("negative length {n}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounded() {
        let mut c = Cursor::new(Bytes::from_static(&[0, 1]));
        assert!(c.i32().is_err());
        assert_eq!(c.i16().ok(), Some(1));
        let mut c = Cursor::new(Bytes::from_static(&[0x80, 0x80]));
        assert!(c.varlong().is_err());
        let mut c = Cursor::new(Bytes::from_static(&[20, 1, 2]));
        assert!(c.nullable_bytes().is_err());
        let mut c = Cursor::new(Bytes::from_static(&[3]));
        assert!(c.nullable_bytes().is_err());
        let mut c = Cursor::new(Bytes::from_static(&[1]));
        assert_eq!(c.nullable_bytes().ok(), Some(None));
    }

    #[test]
    fn a_bad_varlong_fails() {
        let mut c = Cursor::new(Bytes::from_static(&[0x80, 0x80]));
        assert_eq!(
            c.varlong().map_err(|e| e.to_string()).err().as_deref(),
            Cursor::new(Bytes::new())
                .i8()
                .map_err(|e| e.to_string())
                .err()
                .as_deref(),
            "a truncated varlong fails as a read past the end"
        );
        let mut c = Cursor::new(Bytes::from_static(&[0xff; 11]));
        let err = c.varlong().err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("longer than 10 bytes"), "{err}");
    }
}
