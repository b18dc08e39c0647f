# cmake -DINPUT=file -DOUTPUT=file.cpp -DSYMBOL=name -P EmbedBinary.cmake
# Writes a C++ file defining `extern const unsigned char SYMBOL[]` with
# INPUT's bytes.
file(READ "${INPUT}" _hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _bytes "${_hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" _bytes "${_bytes}")
file(WRITE "${OUTPUT}"
  "// Generated from ${INPUT}; do not edit.\n"
  "extern const unsigned char ${SYMBOL}[];\n"
  "alignas(8) const unsigned char ${SYMBOL}[] = {\n${_bytes}};\n")
