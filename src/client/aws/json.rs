//! A reader for the flat JSON objects `AWS_MSK_IAM` and IMDS exchange: one object whose values
//! are strings, numbers, booleans or null. Anything else (nesting, trailing bytes, bad escapes,
//! a repeated key) is refused; the input's length bounds everything it allocates.

/// The largest object read: the answers here are a few hundred bytes.
pub(crate) const MAX_OBJECT: usize = 64 * 1024;

/// The members of a flat JSON object, in their order; a non-string scalar is kept as its text.
pub(crate) fn parse_flat_object(text: &[u8]) -> Result<Vec<(String, String)>, String> {
    if text.len() > MAX_OBJECT {
        return Err(format!(
            "a JSON object of {} bytes (at most {MAX_OBJECT})",
            text.len()
        ));
    }
    let text = std::str::from_utf8(text).map_err(|_| "JSON that is not UTF-8".to_owned())?;
    let mut reader = Reader { text, at: 0 };
    reader.skip_space();
    reader.consume('{')?;
    let mut members: Vec<(String, String)> = Vec::new();
    reader.skip_space();
    if reader.peek() == Some('}') {
        reader.at += 1;
    } else {
        loop {
            reader.skip_space();
            let key = reader.string()?;
            reader.skip_space();
            reader.consume(':')?;
            reader.skip_space();
            let value = reader.scalar()?;
            if members.iter().any(|(k, _)| *k == key) {
                return Err(format!("JSON key `{key}` repeated"));
            }
            members.push((key, value));
            reader.skip_space();
            match reader.next() {
                Some(',') => {}
                Some('}') => break,
                _ => return Err(format!("JSON: `,` or `}}` expected at byte {}", reader.at)),
            }
        }
    }
    reader.skip_space();
    if reader.at != text.len() {
        return Err(format!(
            "JSON: bytes after the object at byte {}",
            reader.at
        ));
    }
    Ok(members)
}

/// The value of `key` among `members`.
pub(crate) fn field<'a>(members: &'a [(String, String)], key: &str) -> Option<&'a str> {
    members
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

struct Reader<'a> {
    text: &'a str,
    at: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<char> {
        self.text[self.at..].chars().next()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += c.len_utf8();
        Some(c)
    }

    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\n' | '\r')) {
            self.at += 1;
        }
    }

    fn consume(&mut self, wanted: char) -> Result<(), String> {
        match self.next() {
            Some(c) if c == wanted => Ok(()),
            _ => Err(format!("JSON: `{wanted}` expected at byte {}", self.at)),
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .text
            .get(self.at..self.at + 4)
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| format!("JSON: bad \\u escape at byte {}", self.at))?;
        self.at += 4;
        u32::from_str_radix(digits, 16).map_err(|e| e.to_string())
    }

    fn string(&mut self) -> Result<String, String> {
        self.consume('"')?;
        let mut out = String::new();
        loop {
            match self.next() {
                None => return Err("JSON: unterminated string".to_owned()),
                Some('"') => return Ok(out),
                Some('\\') => {
                    let c = match self.next() {
                        Some('"') => '"',
                        Some('\\') => '\\',
                        Some('/') => '/',
                        Some('b') => '\u{8}',
                        Some('f') => '\u{c}',
                        Some('n') => '\n',
                        Some('r') => '\r',
                        Some('t') => '\t',
                        Some('u') => {
                            let first = self.hex4()?;
                            let code = if (0xd800..0xdc00).contains(&first) {
                                if self.next() != Some('\\') || self.next() != Some('u') {
                                    return Err("JSON: lone surrogate".to_owned());
                                }
                                let second = self.hex4()?;
                                if !(0xdc00..0xe000).contains(&second) {
                                    return Err("JSON: lone surrogate".to_owned());
                                }
                                0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00)
                            } else {
                                first
                            };
                            char::from_u32(code).ok_or("JSON: lone surrogate")?
                        }
                        _ => return Err(format!("JSON: bad escape at byte {}", self.at)),
                    };
                    out.push(c);
                }
                Some(c) if u32::from(c) < 0x20 => {
                    return Err("JSON: control character in a string".to_owned());
                }
                Some(c) => out.push(c),
            }
        }
    }

    fn scalar(&mut self) -> Result<String, String> {
        match self.peek() {
            Some('"') => self.string(),
            Some('{' | '[') => Err(format!("JSON: nested value at byte {}", self.at)),
            _ => {
                let start = self.at;
                while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || matches!(c, '-' | '+' | '.'))
                {
                    self.at += 1;
                }
                let word = &self.text[start..self.at];
                let number = word.parse::<f64>().is_ok() && !word.starts_with('+');
                if matches!(word, "true" | "false" | "null") || number {
                    Ok(word.to_owned())
                } else {
                    Err(format!("JSON: bad value at byte {start}"))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msk_iam_flat_objects_are_read_and_anything_else_refused() {
        let members = parse_flat_object(
            br#" {"version":"2020_10_22","request-id":"a\"b\u00e9\ud83d\ude00","n":-1.5e3,"ok":true,"x":null} "#,
        )
        .expect("valid");
        assert_eq!(field(&members, "version"), Some("2020_10_22"));
        assert_eq!(field(&members, "request-id"), Some("a\"bé😀"));
        assert_eq!(field(&members, "n"), Some("-1.5e3"));
        assert_eq!(parse_flat_object(b"{}").expect("empty"), vec![]);
        for bad in [
            &b"{"[..],
            b"[]",
            br#"{"a":{"b":1}}"#,
            br#"{"a":[1]}"#,
            br#"{"a":"1","a":"2"}"#,
            br#"{"a":"1"} x"#,
            br#"{"a":"\ud800"}"#,
            br#"{"a":"\x"}"#,
            br#"{"a":nope}"#,
            br#"{"a" "b"}"#,
            b"{\"a\":\"\x01\"}",
            b"\xff",
        ] {
            assert!(
                parse_flat_object(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let huge = format!("{{\"a\":\"{}\"}}", "x".repeat(MAX_OBJECT));
        assert!(
            parse_flat_object(huge.as_bytes())
                .unwrap_err()
                .contains("at most")
        );
    }
}
