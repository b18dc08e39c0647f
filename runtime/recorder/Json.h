// A minimal JSON writer for the database's metadata files (the recorder
// only writes JSON; Python reads it).
#ifndef MNEME_RECORDER_JSON_H
#define MNEME_RECORDER_JSON_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace mneme::recorder {

class JsonWriter {
public:
  JsonWriter &beginObject() { return open('{'); }
  JsonWriter &endObject() { return close('}'); }
  JsonWriter &beginArray() { return open('['); }
  JsonWriter &endArray() { return close(']'); }
  JsonWriter &key(std::string_view K) {
    separate();
    quote(K);
    Out += ':';
    AfterKey = true;
    return *this;
  }
  JsonWriter &value(std::string_view V) { separate(); quote(V); return *this; }
  JsonWriter &value(const char *V) { return value(std::string_view(V)); }
  JsonWriter &value(bool V) { separate(); Out += V ? "true" : "false"; return *this; }
  JsonWriter &value(uint64_t V) { separate(); Out += std::to_string(V); return *this; }
  JsonWriter &value(int64_t V) { separate(); Out += std::to_string(V); return *this; }
  JsonWriter &value(int V) { return value(static_cast<int64_t>(V)); }
  JsonWriter &value(unsigned V) { return value(static_cast<uint64_t>(V)); }
  JsonWriter &value(double V) {
    separate();
    char Buf[32];
    std::snprintf(Buf, sizeof Buf, "%.9g", V);
    Out += Buf;
    return *this;
  }
  JsonWriter &null() { separate(); Out += "null"; return *this; }
  // Inserts an already-serialised JSON value.
  JsonWriter &raw(std::string_view Json) { separate(); Out += Json; return *this; }
  template <class T> JsonWriter &field(std::string_view K, const T &V) { return key(K).value(V); }
  const std::string &str() const { return Out; }

private:
  JsonWriter &open(char C) { separate(); Out += C; First = true; return *this; }
  JsonWriter &close(char C) { Out += C; First = false; return *this; }
  void separate() {
    if (AfterKey) {
      AfterKey = false;
      return;
    }
    if (!First && !Out.empty())
      Out += ',';
    First = false;
  }
  void quote(std::string_view S) {
    Out += '"';
    for (unsigned char C : S) {
      if (C == '"' || C == '\\') {
        Out += '\\';
        Out += static_cast<char>(C);
      } else if (C < 0x20) {
        char Buf[8];
        std::snprintf(Buf, sizeof Buf, "\\u%04x", C);
        Out += Buf;
      } else {
        Out += static_cast<char>(C);
      }
    }
    Out += '"';
  }
  std::string Out;
  bool First = true, AfterKey = false;
};

} // namespace mneme::recorder

#endif
