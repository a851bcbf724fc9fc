// Datatypes by name and by size: MPI_Type_set_name, MPI_Type_get_name and
// MPI_Type_match_size.
//
// Names are the rank's own (an MPI process's, as the standard has them):
// rank_state::type_names, dropped when the type is freed. A predefined
// type without one is called by its MPI name.
#include <cstring>
#include <string>
#include "mpi/coll.hpp"
#include "mpi/datatype.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

using namespace weft::mpi;

WEFT_MPI_API int MPI_Type_set_name(MPI_Datatype datatype, const char* type_name) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Type_set_name";
    rank_state& me = self(call);
    lookup(call, datatype, false);  // a type, committed or not
    if (type_name == nullptr) fail(call, MPI_ERR_ARG, "the name is null");
    // Longer names are cut, as MPI_Comm_set_name's are.
    me.type_names[datatype].assign(type_name, strnlen(type_name, MPI_MAX_OBJECT_NAME - 1));
  });
}

WEFT_MPI_API int MPI_Type_get_name(MPI_Datatype datatype, char* type_name, int* resultlen) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Type_get_name";
    rank_state& me = self(call);
    lookup(call, datatype, false);
    if (type_name == nullptr || resultlen == nullptr)
      fail(call, MPI_ERR_ARG, "type_name or resultlen is null");
    std::string name;
    if (auto it = me.type_names.find(datatype); it != me.type_names.end())
      name = it->second;
    else if (is_predefined(datatype))
      name = coll::type_name(datatype);
    std::memcpy(type_name, name.c_str(), name.size() + 1);
    *resultlen = int(name.size());
  });
}

WEFT_MPI_API int MPI_Type_match_size(int typeclass, int size, MPI_Datatype* datatype) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Type_match_size";
    if (datatype == nullptr) fail(call, MPI_ERR_ARG, "datatype is null");
    MPI_Datatype found = MPI_DATATYPE_NULL;
    const MPI_Datatype* candidates = nullptr;
    static const MPI_Datatype reals[] = {MPI_FLOAT, MPI_DOUBLE, MPI_LONG_DOUBLE, 0};
    static const MPI_Datatype integers[] = {MPI_INT8_T, MPI_INT16_T, MPI_INT32_T, MPI_INT64_T, 0};
    static const MPI_Datatype complexes[] = {MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX,
                                             MPI_C_LONG_DOUBLE_COMPLEX, 0};
    switch (typeclass) {
      case MPI_TYPECLASS_REAL:
        candidates = reals;
        break;
      case MPI_TYPECLASS_INTEGER:
        candidates = integers;
        break;
      case MPI_TYPECLASS_COMPLEX:
        candidates = complexes;
        break;
      default:
        fail(call, MPI_ERR_ARG,
             "type class %d is not MPI_TYPECLASS_REAL, MPI_TYPECLASS_INTEGER or "
             "MPI_TYPECLASS_COMPLEX",
             typeclass);
    }
    for (const MPI_Datatype* t = candidates; *t != 0 && found == MPI_DATATYPE_NULL; ++t)
      if (size >= 0 && type_bytes(call, *t) == std::size_t(size)) found = *t;
    if (found == MPI_DATATYPE_NULL)
      fail(call, MPI_ERR_ARG, "no predefined type of that class has %d bytes", size);
    *datatype = found;
  });
}
