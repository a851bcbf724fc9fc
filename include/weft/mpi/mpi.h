/* MPI on weft (layer mpi, docs/mpi.md): the ranks of a process are logical
 * threads on its PEs. A program includes <mpi.h> (weft-mpicc puts this
 * directory on the include path) and is linked by weft-mpicc / weft-mpicxx,
 * which run its main as every rank.
 *
 * Only what libweft-mpi provides is declared here: a program that uses
 * something else (one-sided communication, I/O, intercommunicators,
 * graph topologies, dynamic processes, Fortran) fails to compile, naming the
 * function, rather than at run time.
 * docs/mpi.md lists the coverage, function by function. */
#ifndef WEFT_MPI_H
#define WEFT_MPI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MPI_VERSION 3
#define MPI_SUBVERSION 1

/* Handles are integers, as in MPICH. */
typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Request;
typedef long MPI_Aint;
typedef long long MPI_Count;

typedef struct MPI_Status {
  int MPI_SOURCE;
  int MPI_TAG;
  int MPI_ERROR;
  int weft_cancelled;
  long long weft_bytes; /* what MPI_Get_count reads */
} MPI_Status;

#define MPI_COMM_NULL ((MPI_Comm)0)
#define MPI_COMM_WORLD ((MPI_Comm)1)
#define MPI_COMM_SELF ((MPI_Comm)2)

#define MPI_DATATYPE_NULL ((MPI_Datatype)0)
#define MPI_CHAR ((MPI_Datatype)1)
#define MPI_SIGNED_CHAR ((MPI_Datatype)2)
#define MPI_UNSIGNED_CHAR ((MPI_Datatype)3)
#define MPI_BYTE ((MPI_Datatype)4)
#define MPI_SHORT ((MPI_Datatype)5)
#define MPI_UNSIGNED_SHORT ((MPI_Datatype)6)
#define MPI_INT ((MPI_Datatype)7)
#define MPI_UNSIGNED ((MPI_Datatype)8)
#define MPI_LONG ((MPI_Datatype)9)
#define MPI_UNSIGNED_LONG ((MPI_Datatype)10)
#define MPI_LONG_LONG_INT ((MPI_Datatype)11)
#define MPI_LONG_LONG MPI_LONG_LONG_INT
#define MPI_UNSIGNED_LONG_LONG ((MPI_Datatype)12)
#define MPI_FLOAT ((MPI_Datatype)13)
#define MPI_DOUBLE ((MPI_Datatype)14)
#define MPI_LONG_DOUBLE ((MPI_Datatype)15)
#define MPI_C_BOOL ((MPI_Datatype)16)
#define MPI_INT8_T ((MPI_Datatype)17)
#define MPI_INT16_T ((MPI_Datatype)18)
#define MPI_INT32_T ((MPI_Datatype)19)
#define MPI_INT64_T ((MPI_Datatype)20)
#define MPI_UINT8_T ((MPI_Datatype)21)
#define MPI_UINT16_T ((MPI_Datatype)22)
#define MPI_UINT32_T ((MPI_Datatype)23)
#define MPI_UINT64_T ((MPI_Datatype)24)
#define MPI_WCHAR ((MPI_Datatype)25)
#define MPI_AINT ((MPI_Datatype)26)
#define MPI_COUNT ((MPI_Datatype)27)
/* The pairs of MPI_MAXLOC and MPI_MINLOC: a value, then an int. */
#define MPI_FLOAT_INT ((MPI_Datatype)28)
#define MPI_DOUBLE_INT ((MPI_Datatype)29)
#define MPI_LONG_INT ((MPI_Datatype)30)
#define MPI_2INT ((MPI_Datatype)31)
#define MPI_SHORT_INT ((MPI_Datatype)32)
#define MPI_LONG_DOUBLE_INT ((MPI_Datatype)33)

#define MPI_ANY_SOURCE (-1)
#define MPI_ANY_TAG (-1)
#define MPI_PROC_NULL (-2)
#define MPI_UNDEFINED (-32766)
#define MPI_REQUEST_NULL ((MPI_Request)0)
#define MPI_STATUS_IGNORE ((MPI_Status*)0)
#define MPI_STATUSES_IGNORE ((MPI_Status*)0)
#define MPI_MAX_PROCESSOR_NAME 256
#define MPI_MAX_ERROR_STRING 256
#define MPI_MAX_LIBRARY_VERSION_STRING 256
#define MPI_TAG_UB_VALUE 2147483647 /* tags 0..this */

#define MPI_THREAD_SINGLE 0
#define MPI_THREAD_FUNNELED 1
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE 3

/* Error classes (values as MPICH's where they exist). */
#define MPI_SUCCESS 0
#define MPI_ERR_BUFFER 1
#define MPI_ERR_COUNT 2
#define MPI_ERR_TYPE 3
#define MPI_ERR_TAG 4
#define MPI_ERR_COMM 5
#define MPI_ERR_RANK 6
#define MPI_ERR_REQUEST 19
#define MPI_ERR_ARG 12
#define MPI_ERR_UNKNOWN 13
#define MPI_ERR_TRUNCATE 14
#define MPI_ERR_OTHER 15
#define MPI_ERR_INTERN 16
#define MPI_ERR_IN_STATUS 17
#define MPI_ERR_PENDING 18
#define MPI_ERR_LASTCODE 1073741823

/* Environment */
int MPI_Init(int* argc, char*** argv);
int MPI_Init_thread(int* argc, char*** argv, int required, int* provided);
int MPI_Initialized(int* flag);
int MPI_Finalize(void);
int MPI_Finalized(int* flag);
int MPI_Abort(MPI_Comm comm, int errorcode);
int MPI_Query_thread(int* provided);
int MPI_Is_thread_main(int* flag);
double MPI_Wtime(void);
double MPI_Wtick(void);
int MPI_Get_processor_name(char* name, int* resultlen);
int MPI_Get_version(int* version, int* subversion);
int MPI_Get_library_version(char* version, int* resultlen);
int MPI_Error_string(int errorcode, char* string, int* resultlen);
int MPI_Error_class(int errorcode, int* errorclass);
int MPI_Add_error_class(int* errorclass);
int MPI_Add_error_code(int errorclass, int* errorcode);
int MPI_Add_error_string(int errorcode, const char* string);

/* Communicators: the two predefined ones */
int MPI_Comm_rank(MPI_Comm comm, int* rank);
int MPI_Comm_size(MPI_Comm comm, int* size);

/* Datatypes: the predefined ones */
int MPI_Type_size(MPI_Datatype datatype, int* size);
int MPI_Get_count(const MPI_Status* status, MPI_Datatype datatype, int* count);

/* Point to point: standard mode, blocking and non-blocking */
int MPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status* status);
int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status* status);
int MPI_Isend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request* request);
int MPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request* request);

/* Completion */
int MPI_Wait(MPI_Request* request, MPI_Status* status);
int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status);
int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]);
int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]);
int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status);
int MPI_Request_free(MPI_Request* request);

/* Communicators, groups, attributes and error handlers (src/mpi/comm.cpp,
 * group.cpp, attr.cpp). Intracommunicators only. */
typedef int MPI_Group;
typedef int MPI_Errhandler;
typedef void MPI_Comm_errhandler_function(MPI_Comm*, int*, ...);
typedef MPI_Comm_errhandler_function MPI_Comm_errhandler_fn;
typedef int MPI_Comm_copy_attr_function(MPI_Comm oldcomm, int comm_keyval, void* extra_state,
                                        void* attribute_val_in, void* attribute_val_out, int* flag);
typedef int MPI_Comm_delete_attr_function(MPI_Comm comm, int comm_keyval, void* attribute_val,
                                          void* extra_state);
typedef int MPI_Info;
#define MPI_INFO_NULL ((MPI_Info)0)

#define MPI_GROUP_NULL ((MPI_Group)0)
#define MPI_GROUP_EMPTY ((MPI_Group)1)
#define MPI_ERRHANDLER_NULL ((MPI_Errhandler)0)
#define MPI_ERRORS_ARE_FATAL ((MPI_Errhandler)1)
#define MPI_ERRORS_RETURN ((MPI_Errhandler)2)

#define MPI_IDENT 0
#define MPI_CONGRUENT 1
#define MPI_SIMILAR 2
#define MPI_UNEQUAL 3
#define MPI_COMM_TYPE_SHARED 1
#define MPI_MAX_OBJECT_NAME 128

#define MPI_KEYVAL_INVALID (-1)
/* Predefined attributes of MPI_COMM_WORLD (MPI_Comm_get_attr). */
#define MPI_TAG_UB 1
#define MPI_HOST 2
#define MPI_IO 3
#define MPI_WTIME_IS_GLOBAL 4
#define MPI_UNIVERSE_SIZE 5
#define MPI_APPNUM 6
#define MPI_LASTUSEDCODE 7 /* the last of MPI_Add_error_class/_code */
#define MPI_COMM_NULL_COPY_FN ((MPI_Comm_copy_attr_function*)0)
#define MPI_COMM_NULL_DELETE_FN ((MPI_Comm_delete_attr_function*)0)
#define MPI_COMM_DUP_FN ((MPI_Comm_copy_attr_function*)1)

#define MPI_ERR_GROUP 8
#define MPI_ERR_KEYVAL 48

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm);
int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm);
int MPI_Comm_idup(MPI_Comm comm, MPI_Comm* newcomm, MPI_Request* request);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm);
int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm);
int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm);
int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm);
int MPI_Comm_free(MPI_Comm* comm);
int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int* result);
int MPI_Comm_test_inter(MPI_Comm comm, int* flag);
/* Intercommunicators: point-to-point, merge, free and compare; their
   collectives and the calls that derive communicators from them return
   MPI_ERR_COMM ("not implemented"; docs/mpi.md). */
int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm,
                         int remote_leader, int tag, MPI_Comm* newintercomm);
int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm* newintracomm);
int MPI_Comm_remote_size(MPI_Comm comm, int* size);
int MPI_Comm_remote_group(MPI_Comm comm, MPI_Group* group);
int MPI_Comm_set_name(MPI_Comm comm, const char* comm_name);
int MPI_Comm_get_name(MPI_Comm comm, char* comm_name, int* resultlen);
int MPI_Comm_group(MPI_Comm comm, MPI_Group* group);

int MPI_Group_size(MPI_Group group, int* size);
int MPI_Group_rank(MPI_Group group, int* rank);
int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2,
                              int ranks2[]);
int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int* result);
int MPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup);
int MPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup);
int MPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup);
int MPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup);
int MPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup);
int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup);
int MPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup);
int MPI_Group_free(MPI_Group* group);

int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function* comm_copy_attr_fn,
                           MPI_Comm_delete_attr_function* comm_delete_attr_fn, int* comm_keyval,
                           void* extra_state);
int MPI_Comm_free_keyval(int* comm_keyval);
int MPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void* attribute_val);
int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void* attribute_val, int* flag);
int MPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval);

int MPI_Comm_create_errhandler(MPI_Comm_errhandler_function* comm_errhandler_fn,
                               MPI_Errhandler* errhandler);
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler);
int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler* errhandler);
int MPI_Comm_call_errhandler(MPI_Comm comm, int errorcode);
int MPI_Errhandler_free(MPI_Errhandler* errhandler);

/* Derived datatypes (docs/mpi.md "Derived datatypes"). MPI_Type_size and
 * MPI_Get_count above take them too. */
#define MPI_PACKED ((MPI_Datatype)34) /* what MPI_Pack makes: bytes */
#define MPI_BOTTOM ((void*)0)         /* the buffer of a type of absolute addresses */
/* Complex types (C99 _Complex, C++ std::complex: the same layout) and
   C++'s bool. MPI_SUM and MPI_PROD take the complex ones; MPI_LAND,
   MPI_LOR and MPI_LXOR take MPI_CXX_BOOL. */
#define MPI_C_FLOAT_COMPLEX ((MPI_Datatype)35)
#define MPI_C_COMPLEX MPI_C_FLOAT_COMPLEX
#define MPI_C_DOUBLE_COMPLEX ((MPI_Datatype)36)
#define MPI_C_LONG_DOUBLE_COMPLEX ((MPI_Datatype)37)
#define MPI_CXX_BOOL ((MPI_Datatype)38)
#define MPI_CXX_FLOAT_COMPLEX ((MPI_Datatype)39)
#define MPI_CXX_DOUBLE_COMPLEX ((MPI_Datatype)40)
#define MPI_CXX_LONG_DOUBLE_COMPLEX ((MPI_Datatype)41)
#define MPI_COMBINER_NAMED 1
#define MPI_COMBINER_DUP 2
#define MPI_COMBINER_CONTIGUOUS 3
#define MPI_COMBINER_VECTOR 4
#define MPI_COMBINER_HVECTOR 6
#define MPI_COMBINER_INDEXED 7
#define MPI_COMBINER_HINDEXED 9
#define MPI_COMBINER_INDEXED_BLOCK 10
#define MPI_COMBINER_HINDEXED_BLOCK 11
#define MPI_COMBINER_STRUCT 13
#define MPI_COMBINER_RESIZED 19
int MPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype,
                    MPI_Datatype* newtype);
int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                            MPI_Datatype* newtype);
int MPI_Type_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                     MPI_Datatype* newtype); /* MPI-1's name */
int MPI_Type_indexed(int count, const int array_of_blocklengths[],
                     const int array_of_displacements[], MPI_Datatype oldtype,
                     MPI_Datatype* newtype);
int MPI_Type_create_hindexed(int count, const int array_of_blocklengths[],
                             const MPI_Aint array_of_displacements[], MPI_Datatype oldtype,
                             MPI_Datatype* newtype);
int MPI_Type_create_indexed_block(int count, int blocklength, const int array_of_displacements[],
                                  MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_create_hindexed_block(int count, int blocklength,
                                   const MPI_Aint array_of_displacements[], MPI_Datatype oldtype,
                                   MPI_Datatype* newtype);
int MPI_Type_create_struct(int count, const int array_of_blocklengths[],
                           const MPI_Aint array_of_displacements[],
                           const MPI_Datatype array_of_types[], MPI_Datatype* newtype);
int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent,
                            MPI_Datatype* newtype);
int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_set_name(MPI_Datatype datatype, const char* type_name);
int MPI_Type_get_name(MPI_Datatype datatype, char* type_name, int* resultlen);
#define MPI_TYPECLASS_REAL 1
#define MPI_TYPECLASS_INTEGER 2
#define MPI_TYPECLASS_COMPLEX 3
int MPI_Type_match_size(int typeclass, int size, MPI_Datatype* datatype);
/* Attributes on datatypes (as on communicators; keyvals of their own). */
typedef int MPI_Type_copy_attr_function(MPI_Datatype oldtype, int type_keyval, void* extra_state,
                                        void* attribute_val_in, void* attribute_val_out, int* flag);
typedef int MPI_Type_delete_attr_function(MPI_Datatype datatype, int type_keyval,
                                          void* attribute_val, void* extra_state);
#define MPI_TYPE_NULL_COPY_FN ((MPI_Type_copy_attr_function*)0)
#define MPI_TYPE_DUP_FN ((MPI_Type_copy_attr_function*)1)
#define MPI_TYPE_NULL_DELETE_FN ((MPI_Type_delete_attr_function*)0)
int MPI_Type_create_keyval(MPI_Type_copy_attr_function* type_copy_attr_fn,
                           MPI_Type_delete_attr_function* type_delete_attr_fn, int* type_keyval,
                           void* extra_state);
int MPI_Type_free_keyval(int* type_keyval);
int MPI_Type_set_attr(MPI_Datatype datatype, int type_keyval, void* attribute_val);
int MPI_Type_get_attr(MPI_Datatype datatype, int type_keyval, void* attribute_val, int* flag);
int MPI_Type_delete_attr(MPI_Datatype datatype, int type_keyval);
int MPI_Type_commit(MPI_Datatype* datatype);
int MPI_Type_free(MPI_Datatype* datatype);
int MPI_Type_size_x(MPI_Datatype datatype, MPI_Count* size);
int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint* lb, MPI_Aint* extent);
int MPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count* lb, MPI_Count* extent);
int MPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint* true_lb, MPI_Aint* true_extent);
int MPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count* true_lb, MPI_Count* true_extent);
int MPI_Type_extent(MPI_Datatype datatype, MPI_Aint* extent); /* MPI-1's names */
int MPI_Type_lb(MPI_Datatype datatype, MPI_Aint* displacement);
int MPI_Type_ub(MPI_Datatype datatype, MPI_Aint* displacement);
int MPI_Type_get_envelope(MPI_Datatype datatype, int* num_integers, int* num_addresses,
                          int* num_datatypes, int* combiner);
int MPI_Type_get_contents(MPI_Datatype datatype, int max_integers, int max_addresses,
                          int max_datatypes, int array_of_integers[], MPI_Aint array_of_addresses[],
                          MPI_Datatype array_of_datatypes[]);
int MPI_Get_elements(const MPI_Status* status, MPI_Datatype datatype, int* count);
int MPI_Get_elements_x(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count);
int MPI_Pack(const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf, int outsize,
             int* position, MPI_Comm comm);
int MPI_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount,
               MPI_Datatype datatype, MPI_Comm comm);
int MPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int* size);
int MPI_Get_address(const void* location, MPI_Aint* address);
int MPI_Address(void* location, MPI_Aint* address); /* MPI-1's name */
MPI_Aint MPI_Aint_add(MPI_Aint base, MPI_Aint disp);
MPI_Aint MPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2);

/* Collectives and reduction operations (docs/mpi.md "Collectives") */
#define MPI_ERR_ROOT 7
#define MPI_ERR_OP 9
#define MPI_IN_PLACE ((void*)-1)

typedef int MPI_Op;
typedef void MPI_User_function(void* invec, void* inoutvec, int* len, MPI_Datatype* datatype);
#define MPI_OP_NULL ((MPI_Op)0)
#define MPI_MAX ((MPI_Op)1)
#define MPI_MIN ((MPI_Op)2)
#define MPI_SUM ((MPI_Op)3)
#define MPI_PROD ((MPI_Op)4)
#define MPI_LAND ((MPI_Op)5)
#define MPI_BAND ((MPI_Op)6)
#define MPI_LOR ((MPI_Op)7)
#define MPI_BOR ((MPI_Op)8)
#define MPI_LXOR ((MPI_Op)9)
#define MPI_BXOR ((MPI_Op)10)
#define MPI_MINLOC ((MPI_Op)11)
#define MPI_MAXLOC ((MPI_Op)12)
#define MPI_REPLACE ((MPI_Op)13) /* one-sided accumulate only */
#define MPI_NO_OP ((MPI_Op)14)   /* one-sided accumulate only */

int MPI_Op_create(MPI_User_function* user_fn, int commute, MPI_Op* op);
int MPI_Op_free(MPI_Op* op);
int MPI_Op_commutative(MPI_Op op, int* commute);

int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm);
int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm);
int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                MPI_Comm comm);
int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                 MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm);
int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm);
int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                  MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                  const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm);
int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
             MPI_Comm comm);
int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               MPI_Comm comm);

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request);
int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               MPI_Request* request);
int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request* request);
int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request* request);
int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                MPI_Request* request);
int MPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                 MPI_Comm comm, MPI_Request* request);
int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request* request);
int MPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                  MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                  int root, MPI_Comm comm, MPI_Request* request);
int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);
int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request* request);
int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);
int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);
int MPI_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                   const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                   MPI_Request* request);
int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request* request);
int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                              MPI_Request* request);
int MPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
              MPI_Comm comm, MPI_Request* request);
int MPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                MPI_Comm comm, MPI_Request* request);

/* Point to point, the rest (docs/mpi.md): the synchronous, buffered and
 * ready send modes, probe and matched probe, persistent requests, cancel,
 * and the other completion forms. */
typedef int MPI_Message;
#define MPI_MESSAGE_NULL ((MPI_Message)0)
#define MPI_MESSAGE_NO_PROC ((MPI_Message)-1)
/* What a buffered send takes of the attached buffer beyond its data. */
#define MPI_BSEND_OVERHEAD 96

int MPI_Ssend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Bsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Rsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Issend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request);
int MPI_Ibsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request);
int MPI_Irsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request);
int MPI_Buffer_attach(void* buffer, int size);
int MPI_Buffer_detach(void* buffer_addr, int* size);
int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status* status);

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status);
int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status);
int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status);
int MPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message,
                MPI_Status* status);
int MPI_Mrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message,
              MPI_Status* status);
int MPI_Imrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message,
               MPI_Request* request);

int MPI_Send_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                  MPI_Comm comm, MPI_Request* request);
int MPI_Ssend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request* request);
int MPI_Bsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request* request);
int MPI_Rsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request* request);
int MPI_Recv_init(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                  MPI_Request* request);
int MPI_Start(MPI_Request* request);
int MPI_Startall(int count, MPI_Request requests[]);

int MPI_Cancel(MPI_Request* request);
int MPI_Test_cancelled(const MPI_Status* status, int* flag);
int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status);
int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]);
int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]);
int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status);
int MPI_Status_set_elements(MPI_Status* status, MPI_Datatype datatype, int count);
int MPI_Status_set_elements_x(MPI_Status* status, MPI_Datatype datatype, MPI_Count count);
int MPI_Status_set_cancelled(MPI_Status* status, int flag);

/* Process topologies: Cartesian (src/mpi/topo.cpp), graph and distributed
 * graph (src/mpi/topo_graph.cpp); neighbourhood collectives on any of them
 * (src/mpi/neighbor.cpp). */
#define MPI_GRAPH 1
#define MPI_CART 2
#define MPI_DIST_GRAPH 3
#define MPI_ERR_TOPOLOGY 10
#define MPI_ERR_NO_MEM 34
#define MPI_ERR_DIMS 11
int MPI_Dims_create(int nnodes, int ndims, int dims[]);
int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[],
                    int reorder, MPI_Comm* comm_cart);
int MPI_Topo_test(MPI_Comm comm, int* status);
int MPI_Cart_map(MPI_Comm comm, int ndims, const int dims[], const int periods[], int* newrank);
int MPI_Cartdim_get(MPI_Comm comm, int* ndims);
int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]);
int MPI_Cart_rank(MPI_Comm comm, const int coords[], int* rank);
int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]);
int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int* rank_source, int* rank_dest);
int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm);
/* Addresses of the library's own, not small integers: a compiler that
 * follows a pointer argument warns about reading from address 2. */
extern int MPI_weft_unweighted_[1];
extern int MPI_weft_weights_empty_[1];
#define MPI_UNWEIGHTED (MPI_weft_unweighted_)
#define MPI_WEIGHTS_EMPTY (MPI_weft_weights_empty_)
int MPI_Graph_create(MPI_Comm comm_old, int nnodes, const int index[], const int edges[],
                     int reorder, MPI_Comm* comm_graph);
int MPI_Graph_map(MPI_Comm comm, int nnodes, const int index[], const int edges[], int* newrank);
int MPI_Graphdims_get(MPI_Comm comm, int* nnodes, int* nedges);
int MPI_Graph_get(MPI_Comm comm, int maxindex, int maxedges, int index[], int edges[]);
int MPI_Graph_neighbors_count(MPI_Comm comm, int rank, int* nneighbors);
int MPI_Graph_neighbors(MPI_Comm comm, int rank, int maxneighbors, int neighbors[]);
int MPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree, const int sources[],
                                   const int sourceweights[], int outdegree,
                                   const int destinations[], const int destweights[], MPI_Info info,
                                   int reorder, MPI_Comm* comm_dist_graph);
int MPI_Dist_graph_create(MPI_Comm comm_old, int n, const int sources[], const int degrees[],
                          const int destinations[], const int weights[], MPI_Info info, int reorder,
                          MPI_Comm* comm_dist_graph);
int MPI_Dist_graph_neighbors_count(MPI_Comm comm, int* indegree, int* outdegree, int* weighted);
int MPI_Dist_graph_neighbors(MPI_Comm comm, int maxindegree, int sources[], int sourceweights[],
                             int maxoutdegree, int destinations[], int destweights[]);
int MPI_Neighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                           int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Neighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                            void* recvbuf, const int recvcounts[], const int displs[],
                            MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Neighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                          int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Neighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                           MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                           const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Neighbor_alltoallw(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                           const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                           const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm);
int MPI_Ineighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                            void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                            MPI_Request* request);
int MPI_Ineighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                             void* recvbuf, const int recvcounts[], const int displs[],
                             MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);
int MPI_Ineighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                           int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                           MPI_Request* request);
int MPI_Ineighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                            MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                            const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                            MPI_Request* request);
int MPI_Ineighbor_alltoallw(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                            const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                            const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                            MPI_Request* request);

/* Memory for MPI (plain heap memory here: no transport needs it registered). */
int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr);
int MPI_Free_mem(void* base);

/* Coverage for unmodified programs (docs/mpi.md "What is provided"): info
 * objects, MPI_Pcontrol, MPI_Reduce_local, MPI-1's deprecated names, and
 * the subarray and distributed-array datatypes. */
#define MPI_INFO_ENV ((MPI_Info)1)
#define MPI_MAX_INFO_KEY 255
#define MPI_MAX_INFO_VAL 1024
#define MPI_ERR_INFO 28
#define MPI_ERR_INFO_KEY 29
#define MPI_ERR_INFO_VALUE 30
#define MPI_ERR_INFO_NOKEY 31
int MPI_Info_create(MPI_Info* info);
int MPI_Info_set(MPI_Info info, const char* key, const char* value);
int MPI_Info_get(MPI_Info info, const char* key, int valuelen, char* value, int* flag);
int MPI_Info_get_valuelen(MPI_Info info, const char* key, int* valuelen, int* flag);
int MPI_Info_get_string(MPI_Info info, const char* key, int* buflen, char* value, int* flag);
int MPI_Info_get_nkeys(MPI_Info info, int* nkeys);
int MPI_Info_get_nthkey(MPI_Info info, int n, char* key);
int MPI_Info_delete(MPI_Info info, const char* key);
int MPI_Info_dup(MPI_Info info, MPI_Info* newinfo);
int MPI_Info_free(MPI_Info* info);
int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info);
int MPI_Comm_get_info(MPI_Comm comm, MPI_Info* info_used);

int MPI_Pcontrol(const int level, ...);
int MPI_Reduce_local(const void* inbuf, void* inoutbuf, int count, MPI_Datatype datatype,
                     MPI_Op op);

typedef MPI_Comm_copy_attr_function MPI_Copy_function;
typedef MPI_Comm_delete_attr_function MPI_Delete_function;
typedef void MPI_Handler_function(MPI_Comm*, int*, ...);
#define MPI_NULL_COPY_FN MPI_COMM_NULL_COPY_FN
#define MPI_NULL_DELETE_FN MPI_COMM_NULL_DELETE_FN
#define MPI_DUP_FN MPI_COMM_DUP_FN
int MPI_Keyval_create(MPI_Copy_function* copy_fn, MPI_Delete_function* delete_fn, int* keyval,
                      void* extra_state);
int MPI_Keyval_free(int* keyval);
int MPI_Attr_put(MPI_Comm comm, int keyval, void* attribute_val);
int MPI_Attr_get(MPI_Comm comm, int keyval, void* attribute_val, int* flag);
int MPI_Attr_delete(MPI_Comm comm, int keyval);
int MPI_Errhandler_create(MPI_Handler_function* function, MPI_Errhandler* errhandler);
int MPI_Errhandler_set(MPI_Comm comm, MPI_Errhandler errhandler);
int MPI_Errhandler_get(MPI_Comm comm, MPI_Errhandler* errhandler);
int MPI_Type_hindexed(int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[],
                      MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_struct(int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[],
                    MPI_Datatype array_of_types[], MPI_Datatype* newtype);

#define MPI_COMBINER_SUBARRAY 14
#define MPI_COMBINER_DARRAY 15
#define MPI_ORDER_C 56
#define MPI_ORDER_FORTRAN 57
#define MPI_DISTRIBUTE_BLOCK 121
#define MPI_DISTRIBUTE_CYCLIC 122
#define MPI_DISTRIBUTE_NONE 123
#define MPI_DISTRIBUTE_DFLT_DARG (-49767)
int MPI_Type_create_subarray(int ndims, const int array_of_sizes[], const int array_of_subsizes[],
                             const int array_of_starts[], int order, MPI_Datatype oldtype,
                             MPI_Datatype* newtype);
int MPI_Type_create_darray(int size, int rank, int ndims, const int array_of_gsizes[],
                           const int array_of_distribs[], const int array_of_dargs[],
                           const int array_of_psizes[], int order, MPI_Datatype oldtype,
                           MPI_Datatype* newtype);

/* PMPI_Send and the rest: the profiling interface (written from the
   declarations above by scripts/gen-pmpi-h.py). */
#include "pmpi.h"

#ifdef __cplusplus
}
#endif

#endif /* WEFT_MPI_H */
