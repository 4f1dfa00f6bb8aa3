/* header_layout.c — what a C compiler makes of include/ckpz.h, printed for the Python
 * bindings' test (tests/python/test_bindings.py).
 *
 * python/ckpz/_abi.py declares the header's structs and constants again for ctypes, by
 * hand: ctypes cannot read a header, and a field out of step is read as garbage, not
 * refused. This program prints, for every struct the bindings mirror, its size and each
 * field's offset and size, and the value of every constant they mirror and of every
 * ckpz_error code (from the header's own CKPZ_ERROR_LIST, so a new code needs no edit
 * here); the test compares them line by line with the ctypes declarations and checks
 * that the fields listed here are all the header declares. Output lines:
 *   struct NAME SIZE
 *   field NAME.FIELD OFFSET SIZE
 *   enum NAME SIZE
 *   const NAME VALUE
 *   error NAME VALUE
 */
#include <stddef.h>
#include <stdio.h>

#define CKPZ_EXPERIMENTAL /* the zip source and tune structs, which the bindings mirror */
#define CKPZ_DISABLE_DEPRECATE_WARNINGS /* the layout of the deprecated params fields too */
#include "ckpz.h"

#define STRUCT(T) printf("struct %s %zu\n", #T, sizeof(T))
#define FIELD(T, f) printf("field %s.%s %zu %zu\n", #T, #f, offsetof(T, f), sizeof(((T *)0)->f))
#define ENUM(T) printf("enum %s %zu\n", #T, sizeof(T))
#define CONST(c) printf("const %s %llu\n", #c, (unsigned long long)(c))
#define ERROR_CODE(name, num, text) printf("error %s %d\n", #name, (int)(name));

int main(void)
{
    STRUCT(ckpz_params);
    FIELD(ckpz_params, struct_size);
    FIELD(ckpz_params, level);
    FIELD(ckpz_params, threads);
    FIELD(ckpz_params, chunk_size);
    FIELD(ckpz_params, format);
    FIELD(ckpz_params, raw_dtype);
    FIELD(ckpz_params, mem_limit);
    FIELD(ckpz_params, progress);
    FIELD(ckpz_params, progress_opaque);
    FIELD(ckpz_params, base);
    FIELD(ckpz_params, base_size);
    FIELD(ckpz_params, base_name);
    FIELD(ckpz_params, base_depth);
    FIELD(ckpz_params, policy);
    FIELD(ckpz_params, max_mae);
    FIELD(ckpz_params, patch);
    FIELD(ckpz_params, patch_opaque);
    FIELD(ckpz_params, raw_ndim);
    FIELD(ckpz_params, raw_shape);
    FIELD(ckpz_params, codec);

    STRUCT(ckpz_fd);
    FIELD(ckpz_fd, fd);
    FIELD(ckpz_fd, error);
    FIELD(ckpz_fd, bytes);

    STRUCT(ckpz_stats);
    FIELD(ckpz_stats, struct_size);
    FIELD(ckpz_stats, original_bytes);
    FIELD(ckpz_stats, compressed_bytes);
    FIELD(ckpz_stats, tensor_bytes);
    FIELD(ckpz_stats, tensors);
    FIELD(ckpz_stats, chunks);
    FIELD(ckpz_stats, format);

    STRUCT(ckpz_base_info);
    FIELD(ckpz_base_info, struct_size);
    FIELD(ckpz_base_info, needed);
    FIELD(ckpz_base_info, size);
    FIELD(ckpz_base_info, checksum);
    FIELD(ckpz_base_info, depth);
    FIELD(ckpz_base_info, name);

    STRUCT(ckpz_entry);
    FIELD(ckpz_entry, struct_size);
    FIELD(ckpz_entry, name);
    FIELD(ckpz_entry, dtype);
    FIELD(ckpz_entry, ndim);
    FIELD(ckpz_entry, shape);
    FIELD(ckpz_entry, offset);
    FIELD(ckpz_entry, length);
    FIELD(ckpz_entry, compressed);
    FIELD(ckpz_entry, chunks);
    FIELD(ckpz_entry, based);
    FIELD(ckpz_entry, base_offset);
    FIELD(ckpz_entry, lossy);
    FIELD(ckpz_entry, lossy_mode);
    FIELD(ckpz_entry, lossy_bound);
    FIELD(ckpz_entry, abs_bound);
    FIELD(ckpz_entry, mae);
    FIELD(ckpz_entry, max_error);
    FIELD(ckpz_entry, rmse);
    FIELD(ckpz_entry, psnr);
    FIELD(ckpz_entry, exceptions);
    FIELD(ckpz_entry, changed);
    FIELD(ckpz_entry, frozen);
    FIELD(ckpz_entry, role);
    FIELD(ckpz_entry, role_why);
    FIELD(ckpz_entry, beta2);
    FIELD(ckpz_entry, beta2_from);
    FIELD(ckpz_entry, lr);
    FIELD(ckpz_entry, lr_from);

    STRUCT(ckpz_archive_info);
    FIELD(ckpz_archive_info, struct_size);
    FIELD(ckpz_archive_info, format_version);
    FIELD(ckpz_archive_info, format);
    FIELD(ckpz_archive_info, original_size);
    FIELD(ckpz_archive_info, compressed_size);
    FIELD(ckpz_archive_info, chunk_size);
    FIELD(ckpz_archive_info, content_checksum);
    FIELD(ckpz_archive_info, entries);
    FIELD(ckpz_archive_info, chunks);
    FIELD(ckpz_archive_info, lossy);

    STRUCT(ckpz_span);
    FIELD(ckpz_span, offset);
    FIELD(ckpz_span, length);
    FIELD(ckpz_span, dst);

    STRUCT(ckpz_zip_member);
    FIELD(ckpz_zip_member, name);
    FIELD(ckpz_zip_member, data);
    FIELD(ckpz_zip_member, size);

    STRUCT(ckpz_zip_options);
    FIELD(ckpz_zip_options, struct_size);
    FIELD(ckpz_zip_options, alignment);
    FIELD(ckpz_zip_options, crc32);
    FIELD(ckpz_zip_options, id_name);
    FIELD(ckpz_zip_options, id_names_hash);

    STRUCT(ckpz_source);
    FIELD(ckpz_source, struct_size);
    FIELD(ckpz_source, read);
    FIELD(ckpz_source, pread);
    FIELD(ckpz_source, opaque);
    FIELD(ckpz_source, size);
    FIELD(ckpz_source, progress);
    FIELD(ckpz_source, progress_opaque);

    STRUCT(ckpz_tune_result);
    FIELD(ckpz_tune_result, struct_size);
    FIELD(ckpz_tune_result, level);
    FIELD(ckpz_tune_result, threads);
    FIELD(ckpz_tune_result, policy);
    FIELD(ckpz_tune_result, save_seconds);
    FIELD(ckpz_tune_result, uncompressed_seconds);
    FIELD(ckpz_tune_result, measure_seconds);

    STRUCT(ckpz_st_tensor);
    FIELD(ckpz_st_tensor, name);
    FIELD(ckpz_st_tensor, dtype);
    FIELD(ckpz_st_tensor, ndim);
    FIELD(ckpz_st_tensor, shape);
    FIELD(ckpz_st_tensor, dtype_name);
    FIELD(ckpz_st_tensor, elem_size);

    STRUCT(ckpz_st_meta);
    FIELD(ckpz_st_meta, key);
    FIELD(ckpz_st_meta, value);

    STRUCT(ckpz_grad_params);
    FIELD(ckpz_grad_params, struct_size);
    FIELD(ckpz_grad_params, bits);
    FIELD(ckpz_grad_params, block);
    FIELD(ckpz_grad_params, stochastic);
    FIELD(ckpz_grad_params, seed);
    FIELD(ckpz_grad_params, kind);
    FIELD(ckpz_grad_params, density);
    FIELD(ckpz_grad_params, threshold);
    FIELD(ckpz_grad_params, entropy);

    STRUCT(ckpz_grad_info);
    FIELD(ckpz_grad_info, struct_size);
    FIELD(ckpz_grad_info, count);
    FIELD(ckpz_grad_info, dtype);
    FIELD(ckpz_grad_info, bits);
    FIELD(ckpz_grad_info, block);
    FIELD(ckpz_grad_info, stochastic);
    FIELD(ckpz_grad_info, kind);
    FIELD(ckpz_grad_info, nnz);

    ENUM(ckpz_error);
    ENUM(ckpz_dtype);
    ENUM(ckpz_input_format);
    ENUM(ckpz_codec);

    CONST(CKPZ_LEVEL_MIN);
    CONST(CKPZ_LEVEL_MAX);
    CONST(CKPZ_LEVEL_DEFAULT);
    CONST(CKPZ_LEVEL_STORE);
    CONST(CKPZ_SIZE_UNKNOWN);
    CONST(CKPZ_BASE_NAME_MAX);
    CONST(CKPZ_BASE_PROBE);
    CONST(CKPZ_DTYPE_NONE);
    CONST(CKPZ_DTYPE_BF16);
    CONST(CKPZ_DTYPE_F16);
    CONST(CKPZ_DTYPE_F32);
    CONST(CKPZ_DTYPE_U8);
    CONST(CKPZ_INPUT_TORCH);
    CONST(CKPZ_INPUT_SAFETENSORS);
    CONST(CKPZ_PUBLISH_REPLACE);
    CONST(CKPZ_PUBLISH_DIRECTORY);
    CONST(CKPZ_PUBLISH_DURABLE);
    CONST(CKPZ_PUBLISH_ANONYMOUS);
    CONST(CKPZ_GRAD_DENSE);
    CONST(CKPZ_GRAD_TOPK);

    CKPZ_ERROR_LIST(ERROR_CODE)
    return 0;
}
