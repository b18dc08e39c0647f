# cmake -DINPUT=file -DOUTPUT=file.cpp -DSYMBOL=name -P EmbedText.cmake
# Writes a C++ file defining `extern const char SYMBOL[]` with INPUT's text.
file(READ "${INPUT}" _text)
file(WRITE "${OUTPUT}"
  "// Generated from ${INPUT}; do not edit.\n"
  "extern const char ${SYMBOL}[];\n"
  "const char ${SYMBOL}[] = R\"mneme_text(${_text})mneme_text\";\n")
