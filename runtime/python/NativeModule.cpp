// mneme_cc._native: the C++ format code, exposed to Python.
#include "mneme/EmbeddedIR.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

namespace nb = nanobind;
namespace ir = mneme::embedded_ir;

namespace {

nb::list decodeEmbeddedIR(nb::bytes Data) {
  std::vector<ir::RecordView> Records;
  std::string Error;
  if (!ir::decodeRecords(Data.c_str(), Data.size(), Records, Error))
    throw nb::value_error(Error.c_str());
  nb::list Out;
  for (const ir::RecordView &R : Records) {
    nb::dict D;
    D["version"] = R.Version;
    D["offset"] = R.Offset;
    D["metadata"] = nb::str(R.Metadata.data(), R.Metadata.size());
    D["bitcode"] = nb::bytes(R.Bitcode.data(), R.Bitcode.size());
    Out.append(D);
  }
  return Out;
}

nb::bytes encodeEmbeddedIR(const std::string &Metadata, nb::bytes Bitcode) {
  std::string Record = ir::encodeRecord(
      Metadata, std::string_view(Bitcode.c_str(), Bitcode.size()));
  return nb::bytes(Record.data(), Record.size());
}

} // namespace

NB_MODULE(_native, m) {
  m.doc() = "Native parts of mneme-cc (record formats).";
  m.attr("EMBEDDED_IR_FORMAT_VERSION") = ir::FormatVersion;
  m.attr("EMBEDDED_IR_SECTION") = ir::SectionName;
  m.attr("EMBEDDED_IR_HOOK") = ir::RegisterHookName;
  m.def("decode_embedded_ir", &decodeEmbeddedIR, nb::arg("data"),
        "Decode the embedded-IR records of a `.mneme_ir` section.\n\n"
        "Raises ValueError naming the offset of a malformed record.");
  m.def("encode_embedded_ir", &encodeEmbeddedIR, nb::arg("metadata"),
        nb::arg("bitcode"), "Encode one embedded-IR record (for tests and tools).");
}
