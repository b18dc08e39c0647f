// mneme_cc._native: the C++ format code, exposed to Python.
#include "mneme/ContentHash.h"
#include "mneme/EmbeddedIR.h"
#include "mneme/Sha256.h"
#include "mneme/SnapshotStore.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>


#include <zstd.h>

namespace nb = nanobind;
namespace ir = mneme::embedded_ir;
namespace store = mneme::store;
namespace ch = mneme::content_hash;

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

ch::Digest parseDigest(const std::string &Hex) {
  ch::Digest D;
  if (!ch::fromHex(Hex, D))
    throw nb::value_error(("not a content hash: '" + Hex + "'").c_str());
  return D;
}

std::string sha256Hex(nb::bytes Data) { return mneme::sha256::hex(Data.c_str(), Data.size()); }

std::string contentHash(nb::bytes Data) {
  return ch::toHex(ch::hash(Data.c_str(), Data.size()));
}

// (hash, stored bytes); stored is 0 when the chunk was there already.
nb::tuple writeChunk(const std::string &Db, nb::bytes Data, int Level) {
  ch::Digest D = ch::hash(Data.c_str(), Data.size());
  uint64_t Stored = 0;
  std::string Error;
  if (!store::writeChunk(Db, D, Data.c_str(), Data.size(), Level, Stored, Error))
    throw nb::value_error(Error.c_str());
  return nb::make_tuple(ch::toHex(D), Stored);
}

nb::tuple compactChunk(const std::string &Db, const std::string &Hex, int Level) {
  ch::Digest D = parseDigest(Hex);
  uint64_t Before = 0, After = 0;
  std::string Error;
  bool Ok;
  {
    nb::gil_scoped_release Free; // compressed on several threads at once
    Ok = store::compactChunk(Db, D, Level, Before, After, Error);
  }
  if (!Ok)
    throw nb::value_error(Error.c_str());
  return nb::make_tuple(Before, After);
}

nb::bytes readChunk(const std::string &Db, const std::string &Hex) {
  std::string Out, Error;
  const ch::Digest Hash = parseDigest(Hex);
  bool Ok;
  {
    nb::gil_scoped_release Free; // read, decompressed and checked on several threads at once
    Ok = store::readChunk(Db, Hash, Out, Error);
  }
  if (!Ok)
    throw nb::value_error(Error.c_str());
  return nb::bytes(Out.data(), Out.size());
}

nb::dict stateToDict(const store::State &S) {
  nb::dict D;
  D["kind"] = static_cast<uint32_t>(S.Kind);
  D["chunk_size"] = S.ChunkSize;
  D["metadata"] = nb::str(S.Metadata.data(), S.Metadata.size());
  nb::list Regions;
  for (const store::Region &R : S.Regions) {
    nb::dict RD;
    RD["kind"] = static_cast<uint32_t>(R.Kind);
    RD["name"] = R.Name;
    RD["address"] = R.Address;
    RD["size"] = R.Size;
    nb::list Chunks;
    for (const store::ChunkRef &C : R.Chunks)
      Chunks.append(nb::make_tuple(C.Index, ch::toHex(C.Hash)));
    RD["chunks"] = Chunks;
    Regions.append(RD);
  }
  D["regions"] = Regions;
  return D;
}

nb::dict readState(const std::string &Path) {
  store::State S;
  std::string Error;
  if (!store::readStateFile(Path, S, Error))
    throw nb::value_error(Error.c_str());
  return stateToDict(S);
}

nb::dict decodeState(nb::bytes Data) {
  store::State S;
  std::string Error;
  if (!store::decodeState(std::string_view(Data.c_str(), Data.size()), S, Error))
    throw nb::value_error(Error.c_str());
  return stateToDict(S);
}

nb::bytes encodeState(nb::dict D) {
  store::State S;
  S.Kind = static_cast<store::StateKind>(nb::cast<uint32_t>(D["kind"]));
  S.ChunkSize = nb::cast<uint64_t>(D["chunk_size"]);
  S.Metadata = nb::cast<std::string>(D["metadata"]);
  for (nb::handle H : nb::cast<nb::list>(D["regions"])) {
    nb::dict RD = nb::cast<nb::dict>(H);
    store::Region R;
    R.Kind = static_cast<store::RegionKind>(nb::cast<uint32_t>(RD["kind"]));
    R.Name = nb::cast<std::string>(RD["name"]);
    R.Address = nb::cast<uint64_t>(RD["address"]);
    R.Size = nb::cast<uint64_t>(RD["size"]);
    for (nb::handle C : nb::cast<nb::list>(RD["chunks"])) {
      nb::tuple T = nb::cast<nb::tuple>(C);
      R.Chunks.push_back(store::ChunkRef{nb::cast<uint64_t>(T[0]),
                                         parseDigest(nb::cast<std::string>(T[1]))});
    }
    S.Regions.push_back(std::move(R));
  }
  std::string Out = store::encodeState(S);
  return nb::bytes(Out.data(), Out.size());
}

void writeFileAtomic(const std::string &Path, nb::bytes Data, bool Exclusive) {
  std::string Error;
  if (!store::writeFileAtomic(Path, std::string_view(Data.c_str(), Data.size()), Error,
                              Exclusive) &&
      !Error.empty())
    throw nb::value_error(Error.c_str());
}

void initDatabase(const std::string &Dir) {
  std::string Error;
  if (!store::initDatabase(Dir, Error))
    throw nb::value_error(Error.c_str());
}

// A zstd frame of known decompressed size (a compressed fatbinary entry).
// The size is checked against the frame's own header before anything is
// allocated: both come from an untrusted file.
nb::bytes zstdDecompress(nb::bytes Data, uint64_t Size) {
  unsigned long long InFrame = ZSTD_getFrameContentSize(Data.c_str(), Data.size());
  if (InFrame == ZSTD_CONTENTSIZE_ERROR)
    throw nb::value_error("not a zstd frame");
  if (InFrame != ZSTD_CONTENTSIZE_UNKNOWN && InFrame != Size)
    throw nb::value_error("the frame holds another size than stated");
  constexpr uint64_t Limit = uint64_t(1) << 30;
  if (Size > Limit)
    throw nb::value_error("the decompressed size is over 1 GiB");
  std::string Out(Size, '\0');
  size_t N = ZSTD_decompress(Out.data(), Out.size(), Data.c_str(), Data.size());
  if (ZSTD_isError(N))
    throw nb::value_error(ZSTD_getErrorName(N));
  if (N != Size)
    throw nb::value_error("the frame holds another size than stated");
  return nb::bytes(Out.data(), Out.size());
}

} // namespace

NB_MODULE(_native, m) {
  m.doc() = "Native parts of mneme-cc (record formats).";
  m.attr("EMBEDDED_IR_FORMAT_VERSION") = ir::FormatVersion;
  m.attr("EMBEDDED_IR_SECTION") = ir::SectionName;
  m.attr("EMBEDDED_IR_HOOK") = ir::RegisterHookName;
  m.attr("DEVICE_LINK_SYMBOL") = ir::DeviceLinkSymbol;
  m.def("decode_embedded_ir", &decodeEmbeddedIR, nb::arg("data"),
        "Decode the embedded-IR records of a `.mneme_ir` section.\n\n"
        "Raises ValueError naming the offset of a malformed record.");
  m.def("encode_embedded_ir", &encodeEmbeddedIR, nb::arg("metadata"),
        nb::arg("bitcode"), "Encode one embedded-IR record (for tests and tools).");

  m.attr("STORE_FORMAT_VERSION") = store::FormatVersion;
  m.def("content_hash", &contentHash, nb::arg("data"),
        "The store's 128-bit content hash of data, as 32 hex digits.");
  m.def("sha256", &sha256Hex, nb::arg("data"),
        "SHA-256 of data as 64 hex digits, as the serving runtime computes it.");
  m.def("write_chunk", &writeChunk, nb::arg("db"), nb::arg("data"), nb::arg("level") = 1,
        "Store data as a chunk of database db; returns (hash, stored bytes).");
  m.def("compact_chunk", &compactChunk, nb::arg("db"), nb::arg("hash"), nb::arg("level"),
        "Compress a chunk stored raw, in place; returns its (old, new) file size.");
  m.def("read_chunk", &readChunk, nb::arg("db"), nb::arg("hash"),
        "Read and verify a chunk; ValueError names the file on any damage.");
  m.def("read_state", &readState, nb::arg("path"),
        "Read and verify a DeviceState/Image manifest into a dict.");
  m.def("decode_state", &decodeState, nb::arg("data"), "Decode manifest bytes.");
  m.def("encode_state", &encodeState, nb::arg("state"),
        "Encode a manifest dict (as read_state returns) into bytes.");
  m.def("init_database", &initDatabase, nb::arg("dir"),
        "Create or open a record database (index/, chunks/, database.json).");
  m.attr("DATABASE_MARKER") = store::databaseMarker();
  m.def("write_file_atomic", &writeFileAtomic, nb::arg("path"), nb::arg("data"),
        nb::arg("exclusive") = false,
        "Write through a temporary file and a rename (or link, if exclusive).");
  m.def("zstd_decompress", &zstdDecompress, nb::arg("data"), nb::arg("size"),
        "Decompress one zstd frame of the given decompressed size; ValueError if it is not.");
}
