#pragma once
// The keys an input file may hold, as the loader declares them by reading them: every Reader
// call names a key, its type, its range or choices and its default. While a KeyCatalog listens,
// those calls are recorded, so `dtsim describe`, docs/keys.md and the scenario JSON Schema come
// from the code that reads the keys instead of from a second description kept by hand.
#include <map>
#include <string>
#include <vector>

namespace dtsim {

struct KeyDeclaration {
  std::string document;  // "scenario", "device profile"
  std::string pointer;   // JSON pointer, array indices written as "*"
  std::string type;      // integer, number, boolean, string, object, quantity, array, any
  std::string unit;      // quantities: the suffixes the key may carry (_s, _ms ...)
  std::string range;     // "1 to 65536", "> 0 and <= 1"; "" when any value of the type
  std::vector<std::string> choices;  // a string that must be one of these
  std::string fallback;  // the default as written in a file; "" when required or none
  bool required = false;
  // One line of documentation where the code that reads the key gives it (Reader::document: a
  // mechanism unit's own keys); the others' lines are in sim/config/key_docs.cpp.
  std::string doc;
};

class KeyCatalog {
 public:
  KeyCatalog();   // starts listening on this thread
  ~KeyCatalog();  // stops
  KeyCatalog(const KeyCatalog&) = delete;
  KeyCatalog& operator=(const KeyCatalog&) = delete;

  // Whether anyone listens on this thread: a load that is not `describe` builds no declarations.
  static bool listening();
  // Called by the Reader: records a key of the document being read, if anyone listens.
  static void note(KeyDeclaration d);
  // Called by the Reader: the documentation of a key already noted at `pointer`.
  static void note_doc(const std::string& pointer, std::string doc);
  const std::map<std::string, KeyDeclaration>& keys() const { return keys_; }

 private:
  std::map<std::string, KeyDeclaration> keys_;  // by document + pointer
  KeyCatalog* previous_;
};

// Names the kind of document read on this thread while it lives (the scenario by default).
class CatalogDocument {
 public:
  explicit CatalogDocument(std::string name);
  ~CatalogDocument();
  CatalogDocument(const CatalogDocument&) = delete;
  CatalogDocument& operator=(const CatalogDocument&) = delete;

 private:
  std::string previous_;
};

// "/stragglers/3/gpu" -> "/stragglers/*/gpu".
std::string pointer_pattern(const std::string& pointer);

}  // namespace dtsim
