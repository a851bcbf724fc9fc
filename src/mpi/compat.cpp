// Calls unmodified programs make that need no machinery of their own:
// MPI_Pcontrol, MPI_Reduce_local (a reduction on the caller's buffers,
// with the collectives' ops), and MPI-1's and MPI-2's deprecated names
// (attributes, keyvals, error handlers, datatype constructors), each a
// thin alias of the call that replaced it -- so its errors name that call.
#include <vector>
#include "mpi/coll.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

using namespace weft::mpi;

// Profiling tools are not layered on weft's MPI (no PMPI_ names), so
// there is nothing for the level to switch: accepted, as the standard
// lets an implementation ignore it.
WEFT_MPI_API int MPI_Pcontrol(const int, ...) {
  return MPI_SUCCESS;
}

WEFT_MPI_API int MPI_Reduce_local(const void* inbuf, void* inoutbuf, int count,
                                  MPI_Datatype datatype, MPI_Op op) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Reduce_local";
    if (count < 0) fail(call, MPI_ERR_COUNT, "count %d is negative", count);
    if (inbuf == MPI_IN_PLACE || inoutbuf == MPI_IN_PLACE)
      fail(call, MPI_ERR_BUFFER, "MPI_IN_PLACE is not accepted: both buffers are the caller's");
    MPI_Datatype basic = datatype;
    int per = 1;
    // A predefined op on a derived type combines the predefined values
    // it is made of, packed, as the collectives do (coll_api.cpp); a user
    // op gets the buffers and the type as they are.
    const bool packed = !is_predefined(datatype) && op > MPI_OP_NULL && op <= MPI_NO_OP;
    if (packed && !basic_of(call, datatype, &basic, &per))
      fail(call, MPI_ERR_OP,
           "%s on datatype %d, which mixes predefined types: a predefined op takes a derived "
           "type of one predefined type only (a user op takes any)",
           coll::op_name(op), datatype);
    const coll::op_ref r = coll::resolve_op(call, op, basic);
    if (count == 0) return;
    if (inbuf == nullptr || inoutbuf == nullptr)
      fail(call, MPI_ERR_BUFFER, "%s is a null pointer", inbuf == nullptr ? "inbuf" : "inoutbuf");
    if (!packed) {
      coll::apply(r, inbuf, inoutbuf, count, datatype);
      return;
    }
    const std::size_t bytes = std::size_t(count) * type_size(call, datatype);
    std::vector<char> in(bytes + 1), inout(bytes + 1);
    pack(call, datatype, count, inbuf, in.data());
    pack(call, datatype, count, inoutbuf, inout.data());
    coll::apply(r, in.data(), inout.data(), count * per, basic);
    unpack(call, datatype, count, inout.data(), inoutbuf);
  });
}

// ---- MPI-1's attribute and error handler names (deprecated in MPI-2,
// still in many programs).

WEFT_MPI_API int MPI_Keyval_create(MPI_Copy_function* copy_fn, MPI_Delete_function* delete_fn,
                                   int* keyval, void* extra_state) {
  return MPI_Comm_create_keyval(copy_fn, delete_fn, keyval, extra_state);
}

WEFT_MPI_API int MPI_Keyval_free(int* keyval) {
  return MPI_Comm_free_keyval(keyval);
}

WEFT_MPI_API int MPI_Attr_put(MPI_Comm comm, int keyval, void* attribute_val) {
  return MPI_Comm_set_attr(comm, keyval, attribute_val);
}

WEFT_MPI_API int MPI_Attr_get(MPI_Comm comm, int keyval, void* attribute_val, int* flag) {
  return MPI_Comm_get_attr(comm, keyval, attribute_val, flag);
}

WEFT_MPI_API int MPI_Attr_delete(MPI_Comm comm, int keyval) {
  return MPI_Comm_delete_attr(comm, keyval);
}

WEFT_MPI_API int MPI_Errhandler_create(MPI_Handler_function* function, MPI_Errhandler* errhandler) {
  return MPI_Comm_create_errhandler(function, errhandler);
}

WEFT_MPI_API int MPI_Errhandler_set(MPI_Comm comm, MPI_Errhandler errhandler) {
  return MPI_Comm_set_errhandler(comm, errhandler);
}

WEFT_MPI_API int MPI_Errhandler_get(MPI_Comm comm, MPI_Errhandler* errhandler) {
  return MPI_Comm_get_errhandler(comm, errhandler);
}

// ---- MPI-1's datatype constructors whose MPI-2 forms exist
// (MPI_Type_hvector, MPI_Type_extent, MPI_Type_lb, MPI_Type_ub and
// MPI_Address are in datatype_api.cpp).

WEFT_MPI_API int MPI_Type_hindexed(int count, int array_of_blocklengths[],
                                   MPI_Aint array_of_displacements[], MPI_Datatype oldtype,
                                   MPI_Datatype* newtype) {
  return MPI_Type_create_hindexed(count, array_of_blocklengths, array_of_displacements, oldtype,
                                  newtype);
}

WEFT_MPI_API int MPI_Type_struct(int count, int array_of_blocklengths[],
                                 MPI_Aint array_of_displacements[], MPI_Datatype array_of_types[],
                                 MPI_Datatype* newtype) {
  return MPI_Type_create_struct(count, array_of_blocklengths, array_of_displacements,
                                array_of_types, newtype);
}
