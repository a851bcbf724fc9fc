! omp-test fortran_api: the OpenMP routines as a Fortran program calls them
! (`use omp_lib`: the trailing-underscore names, arguments by reference,
! the integer(8) twins chosen by the generic interfaces, locks in
! integer(omp_lock_kind) / integer(omp_nest_lock_kind) variables, character
! arguments with hidden lengths).
!
! Thread numbers, team sizes, levels and ancestors in a region and in a
! nested one; the ICV setters read back through the getters (num_threads,
! dynamic, nested, max-active-levels, schedule, with 4- and 8-byte
! arguments); a schedule(runtime) loop; locks and nest locks under
! contention (counters updated by read-pause-write, which loses counts
! without mutual exclusion), their test routines, the nesting count;
! omp_get_wtime; the places routines (their _8 twins give the same
! numbers); host teams; the affinity format through Fortran strings; an
! allocator with traits, made the default; omp_pause_resource between
! regions.
!
! Prints one "omp-test fortran_api: FAIL: <what>, got X expected Y" line
! per failed check and stops with code 1, or prints
! "omp-test fortran_api: ok" (the convention of check.h).
module checks
  implicit none
  integer :: failures = 0
contains
  subroutine check_int(got, expected, what)
    integer, intent(in) :: got, expected
    character(len=*), intent(in) :: what
    if (got /= expected) then
      !$omp critical (check_output)
      failures = failures + 1
      write (*, '(a,a,a,i0,a,i0)') 'omp-test fortran_api: FAIL: ', what, ', got ', got, &
        ' expected ', expected
      !$omp end critical (check_output)
    end if
  end subroutine check_int

  subroutine check_true(cond, what)
    logical, intent(in) :: cond
    character(len=*), intent(in) :: what
    if (.not. cond) then
      !$omp critical (check_output)
      failures = failures + 1
      write (*, '(a,a,a)') 'omp-test fortran_api: FAIL: ', what, ', got false expected true'
      !$omp end critical (check_output)
    end if
  end subroutine check_true

  ! Read, pause, write: loses increments unless mutually excluded.
  subroutine slow_increment(counter)
    integer, intent(inout) :: counter
    integer :: v, k
    v = counter
    do k = 1, 20
      call pause_point()
    end do
    counter = v + 1
  end subroutine slow_increment

  ! An external call the compiler cannot see through keeps the read and
  ! the write of slow_increment apart.
  subroutine pause_point()
    !$omp flush
  end subroutine pause_point
end module checks

program fortran_api
  use omp_lib
  use checks
  implicit none
  integer :: n

  n = expected_threads()
  call check_serial()
  call check_team(n)
  call check_nested()
  call check_icvs()
  call check_schedule(n)
  call check_locks(n)
  call check_nest_locks(n)
  call check_time()
  call check_places()
  call check_teams()
  call check_affinity_format(n)
  call check_allocators()
  call check_pause(n)

  if (failures /= 0) then
    write (*, '(a,i0,a)') 'omp-test fortran_api: ', failures, ' failed checks'
    stop 1
  end if
  write (*, '(a)') 'omp-test fortran_api: ok'

contains

  ! OMP_NUM_THREADS when the test sets it (ctest does), else the default.
  integer function expected_threads()
    character(len=32) :: v
    integer :: length, status
    call get_environment_variable('OMP_NUM_THREADS', v, length, status)
    expected_threads = omp_get_max_threads()
    if (status == 0 .and. length > 0) read (v, *) expected_threads
    call check_int(omp_get_max_threads(), expected_threads, 'omp_get_max_threads = OMP_NUM_THREADS')
  end function expected_threads

  subroutine check_serial()
    call check_int(omp_get_thread_num(), 0, 'serial omp_get_thread_num')
    call check_int(omp_get_num_threads(), 1, 'serial omp_get_num_threads')
    call check_true(.not. omp_in_parallel(), 'serial .not. omp_in_parallel')
    call check_int(omp_get_level(), 0, 'serial omp_get_level')
    call check_int(omp_get_active_level(), 0, 'serial omp_get_active_level')
    call check_int(omp_get_ancestor_thread_num(0), 0, 'serial omp_get_ancestor_thread_num(0)')
    call check_int(omp_get_ancestor_thread_num(1), -1, 'serial omp_get_ancestor_thread_num(1)')
    call check_int(omp_get_team_size(0), 1, 'serial omp_get_team_size(0)')
    call check_int(omp_get_team_size(1_8), -1, 'serial omp_get_team_size(1_8)')
    call check_true(omp_get_num_procs() >= 1, 'omp_get_num_procs >= 1')
    call check_true(omp_get_thread_limit() >= 1, 'omp_get_thread_limit >= 1')
    call check_true(.not. omp_in_final(), 'serial .not. omp_in_final')
    call check_true(.not. omp_get_cancellation(), '.not. omp_get_cancellation')
    call check_true(omp_is_initial_device(), 'omp_is_initial_device')
    call check_int(omp_get_device_num(), omp_get_initial_device(), &
                   'omp_get_device_num = omp_get_initial_device on the host')
    call check_int(omp_get_max_task_priority(), 0, 'omp_get_max_task_priority')
  end subroutine check_serial

  subroutine check_team(n)
    integer, intent(in) :: n
    integer :: seen(0:n - 1), id
    seen = 0
    !$omp parallel num_threads(n) private(id) shared(seen)
    id = omp_get_thread_num()
    call check_int(omp_get_num_threads(), n, 'omp_get_num_threads in the region')
    call check_true(id >= 0 .and. id < n, 'omp_get_thread_num in [0, n)')
    if (id >= 0 .and. id < n) then
      !$omp atomic
      seen(id) = seen(id) + 1
    end if
    call check_true(omp_in_parallel() .eqv. (n > 1), 'omp_in_parallel in the region')
    call check_int(omp_get_level(), 1, 'omp_get_level in the region')
    call check_int(omp_get_active_level(), merge(1, 0, n > 1), 'omp_get_active_level in the region')
    call check_int(omp_get_ancestor_thread_num(1), id, 'omp_get_ancestor_thread_num(1)')
    call check_int(omp_get_ancestor_thread_num(1_8), id, 'omp_get_ancestor_thread_num(1_8)')
    call check_int(omp_get_ancestor_thread_num(0), 0, 'omp_get_ancestor_thread_num(0) in the region')
    call check_int(omp_get_team_size(1), n, 'omp_get_team_size(1)')
    call check_int(omp_get_team_size(0_8), 1, 'omp_get_team_size(0_8)')
    !$omp end parallel
    do id = 0, n - 1
      call check_int(seen(id), 1, 'threads numbered id in the region')
    end do

    call omp_set_num_threads(3)
    call check_int(omp_get_max_threads(), 3, 'omp_get_max_threads after omp_set_num_threads(3)')
    !$omp parallel
    !$omp master
    call check_int(omp_get_num_threads(), 3, 'team of omp_set_num_threads(3)')
    !$omp end master
    !$omp end parallel
    call omp_set_num_threads(int(n, 8))
    call check_int(omp_get_max_threads(), n, 'omp_get_max_threads after omp_set_num_threads(n_8)')
  end subroutine check_team

  subroutine check_nested()
    integer :: outer
    call omp_set_max_active_levels(2)
    !$omp parallel num_threads(2) private(outer)
    outer = omp_get_thread_num()
    !$omp parallel num_threads(2)
    call check_int(omp_get_level(), 2, 'omp_get_level nested')
    call check_int(omp_get_active_level(), 2, 'omp_get_active_level nested')
    call check_int(omp_get_num_threads(), 2, 'omp_get_num_threads nested')
    call check_int(omp_get_ancestor_thread_num(1), outer, 'omp_get_ancestor_thread_num(1) nested')
    call check_int(omp_get_ancestor_thread_num(2), omp_get_thread_num(), &
                   'omp_get_ancestor_thread_num(2) nested')
    call check_int(omp_get_team_size(1), 2, 'omp_get_team_size(1) nested')
    call check_int(omp_get_team_size(2), 2, 'omp_get_team_size(2) nested')
    call check_int(omp_get_ancestor_thread_num(3), -1, 'omp_get_ancestor_thread_num(3) nested')
    !$omp end parallel
    !$omp end parallel
    call omp_set_max_active_levels(1)
  end subroutine check_nested

  subroutine check_icvs()
    call omp_set_dynamic(.true.)
    call check_true(omp_get_dynamic(), 'omp_get_dynamic after omp_set_dynamic(.true.)')
    call omp_set_dynamic(.false._8)
    call check_true(.not. omp_get_dynamic(), 'omp_get_dynamic after omp_set_dynamic(.false._8)')

    call omp_set_max_active_levels(3)
    call check_int(omp_get_max_active_levels(), 3, 'omp_get_max_active_levels after 3')
    call omp_set_max_active_levels(1_8)
    call check_int(omp_get_max_active_levels(), 1, 'omp_get_max_active_levels after 1_8')
    call check_true(omp_get_supported_active_levels() >= 1, 'omp_get_supported_active_levels >= 1')
    call omp_set_nested(.true.)
    call check_true(omp_get_nested(), 'omp_get_nested after omp_set_nested(.true.)')
    call check_true(omp_get_max_active_levels() > 1, 'omp_set_nested(.true.) raises max-active-levels')
    call omp_set_nested(.false._8)
    call check_true(.not. omp_get_nested(), 'omp_get_nested after omp_set_nested(.false._8)')
    call check_int(omp_get_max_active_levels(), 1, 'omp_set_nested(.false.) leaves one level')
  end subroutine check_icvs

  subroutine check_schedule(n)
    integer, intent(in) :: n
    integer(omp_sched_kind) :: kind
    integer :: chunk, i, hits(1000)
    integer(8) :: chunk8

    call omp_set_schedule(omp_sched_dynamic, 5)
    call omp_get_schedule(kind, chunk)
    call check_int(int(kind), int(omp_sched_dynamic), 'schedule kind after (dynamic, 5)')
    call check_int(chunk, 5, 'schedule chunk after (dynamic, 5)')
    call omp_set_schedule(omp_sched_guided, 7_8)
    call omp_get_schedule(kind, chunk8)
    call check_int(int(kind), int(omp_sched_guided), 'schedule kind after (guided, 7_8)')
    call check_int(int(chunk8), 7, 'schedule chunk(8) after (guided, 7_8)')
    call omp_set_schedule(omp_sched_static, 0)
    call omp_get_schedule(kind, chunk)
    call check_int(int(kind), int(omp_sched_static), 'schedule kind after (static, 0)')

    ! A runtime-scheduled loop under the ICV just set, and under dynamic.
    call omp_set_schedule(omp_sched_dynamic, 3)
    hits = 0
    !$omp parallel do schedule(runtime) num_threads(n)
    do i = 1, size(hits)
      hits(i) = hits(i) + 1
    end do
    !$omp end parallel do
    call check_int(count(hits /= 1), 0, 'schedule(runtime) loop: iterations not run exactly once')
    call omp_set_schedule(omp_sched_static, 0)
  end subroutine check_schedule

  subroutine check_locks(n)
    integer, intent(in) :: n
    integer, parameter :: per_thread = 2000
    integer(omp_lock_kind) :: lock
    integer :: counter, spun, i
    logical :: got

    call omp_init_lock(lock)
    call omp_set_lock(lock)
    call check_true(.not. omp_test_lock(lock), 'omp_test_lock fails on a held lock')
    call omp_unset_lock(lock)
    got = omp_test_lock(lock)
    call check_true(got, 'omp_test_lock takes a free lock')
    if (got) call omp_unset_lock(lock)

    counter = 0
    spun = 0
    !$omp parallel num_threads(n) private(i) shared(lock, counter, spun)
    do i = 1, per_thread
      call omp_set_lock(lock)
      call slow_increment(counter)
      call omp_unset_lock(lock)
    end do
    ! The same through omp_test_lock.
    do i = 1, per_thread
      do while (.not. omp_test_lock(lock))
      end do
      call slow_increment(spun)
      call omp_unset_lock(lock)
    end do
    !$omp end parallel
    call check_int(counter, n * per_thread, 'increments under omp_set_lock')
    call check_int(spun, n * per_thread, 'increments under omp_test_lock')
    call omp_destroy_lock(lock)
  end subroutine check_locks

  subroutine check_nest_locks(n)
    integer, intent(in) :: n
    integer, parameter :: per_thread = 1000
    integer(omp_nest_lock_kind) :: lock
    integer :: counter, i, depth

    call omp_init_nest_lock(lock)
    call omp_set_nest_lock(lock)
    call omp_set_nest_lock(lock)
    call check_int(omp_test_nest_lock(lock), 3, 'omp_test_nest_lock depth for the owner')
    call omp_unset_nest_lock(lock)
    call omp_unset_nest_lock(lock)
    call omp_unset_nest_lock(lock)

    counter = 0
    !$omp parallel num_threads(n) private(i, depth) shared(lock, counter)
    do i = 1, per_thread
      call omp_set_nest_lock(lock)
      call omp_set_nest_lock(lock)
      call slow_increment(counter)
      depth = omp_test_nest_lock(lock)
      if (depth /= 3) call check_int(depth, 3, 'omp_test_nest_lock depth under contention')
      if (depth > 0) call omp_unset_nest_lock(lock)
      call omp_unset_nest_lock(lock)
      call omp_unset_nest_lock(lock)
    end do
    !$omp barrier
    ! Held by thread 0: every other thread's test fails.
    !$omp master
    call omp_set_nest_lock(lock)
    !$omp end master
    !$omp barrier
    if (omp_get_thread_num() /= 0) then
      call check_int(omp_test_nest_lock(lock), 0, 'omp_test_nest_lock while another thread holds it')
    end if
    !$omp barrier
    !$omp master
    call omp_unset_nest_lock(lock)
    !$omp end master
    !$omp end parallel
    call check_int(counter, n * per_thread, 'increments under a nest lock')
    call omp_destroy_nest_lock(lock)
  end subroutine check_nest_locks

  subroutine check_time()
    double precision :: t0, t1, tick
    t0 = omp_get_wtime()
    t1 = t0
    do while (t1 - t0 < 0.01d0)
      t1 = omp_get_wtime()
    end do
    call check_true(t1 - t0 >= 0.01d0 .and. t1 - t0 < 5d0, 'omp_get_wtime advances')
    tick = omp_get_wtick()
    call check_true(tick > 0d0 .and. tick < 1d0, 'omp_get_wtick in (0, 1)')
  end subroutine check_time

  subroutine check_places()
    integer :: places, p, procs, total
    integer, allocatable :: ids(:), nums(:)
    integer(8), allocatable :: ids8(:), nums8(:)
    character(len=64) :: v
    integer :: length, status
    integer(omp_proc_bind_kind) :: bind

    places = omp_get_num_places()
    call get_environment_variable('OMP_PLACES', v, length, status)
    if (status == 0 .and. length > 0) then
      call check_true(places >= 1, 'omp_get_num_places >= 1 under OMP_PLACES')
    else
      call check_int(places, 0, 'omp_get_num_places without OMP_PLACES')
    end if
    bind = omp_get_proc_bind()
    call check_true(bind >= omp_proc_bind_false .and. bind <= omp_proc_bind_spread, &
                    'omp_get_proc_bind in range')
    total = 0
    do p = 0, places - 1
      procs = omp_get_place_num_procs(p)
      call check_true(procs >= 1, 'omp_get_place_num_procs >= 1')
      call check_int(omp_get_place_num_procs(int(p, 8)), procs, 'omp_get_place_num_procs(p_8)')
      allocate (ids(max(procs, 1)), ids8(max(procs, 1)))
      ids = -1
      ids8 = -1
      call omp_get_place_proc_ids(p, ids)
      call omp_get_place_proc_ids(int(p, 8), ids8)
      call check_int(count(ids(1:procs) < 0), 0, 'omp_get_place_proc_ids: negative ids')
      call check_int(count(ids8(1:procs) /= ids(1:procs)), 0, 'omp_get_place_proc_ids(p_8) ids')
      deallocate (ids, ids8)
      total = total + procs
    end do
    if (places > 0) call check_true(total >= places, 'procs of all places')
    call check_int(omp_get_place_num_procs(places), 0, 'omp_get_place_num_procs past the last')

    !$omp parallel num_threads(2) private(p, nums, nums8)
    p = omp_get_place_num()
    call check_true(p >= -1 .and. p < max(places, 1), 'omp_get_place_num in [-1, places)')
    p = omp_get_partition_num_places()
    call check_true(p >= 0 .and. p <= places, 'omp_get_partition_num_places in [0, places]')
    allocate (nums(max(p, 1)), nums8(max(p, 1)))
    nums = -1
    nums8 = -1
    call omp_get_partition_place_nums(nums)
    call omp_get_partition_place_nums(nums8)
    if (p > 0) then
      call check_int(count(nums(1:p) < 0 .or. nums(1:p) >= places), 0, &
                     'omp_get_partition_place_nums out of range')
      call check_int(count(nums8(1:p) /= nums(1:p)), 0, 'omp_get_partition_place_nums (8) values')
    end if
    deallocate (nums, nums8)
    !$omp end parallel
  end subroutine check_places

  subroutine check_teams()
    integer :: seen(0:1), t
    call check_int(omp_get_num_teams(), 1, 'omp_get_num_teams outside teams')
    call check_int(omp_get_team_num(), 0, 'omp_get_team_num outside teams')
    seen = 0
    !$omp teams num_teams(2) private(t) shared(seen)
    call check_int(omp_get_num_teams(), 2, 'omp_get_num_teams in teams num_teams(2)')
    t = omp_get_team_num()
    call check_true(t >= 0 .and. t < 2, 'omp_get_team_num in [0, 2)')
    ! Each team its own element (atomics are not allowed directly in teams);
    ! two teams of the same number would show as a count of 2 or a lost one.
    if (t >= 0 .and. t < 2) seen(t) = seen(t) + 1
    !$omp end teams
    call check_int(seen(0), 1, 'team 0 ran once')
    call check_int(seen(1), 1, 'team 1 ran once')
  end subroutine check_teams

  subroutine check_affinity_format(n)
    integer, intent(in) :: n
    character(len=32) :: buffer
    character(len=2) :: short
    integer :: length, id, got
    character(len=:), allocatable :: saved

    length = omp_get_affinity_format(buffer)
    allocate (character(len=length) :: saved)
    length = omp_get_affinity_format(saved)
    call omp_set_affinity_format('T%n')
    call check_int(omp_get_affinity_format(buffer), 3, 'omp_get_affinity_format length')
    call check_true(buffer == 'T%n', 'omp_get_affinity_format text: "'//trim(buffer)//'"')
    call check_int(omp_get_affinity_format(short), 3, 'omp_get_affinity_format length, short buffer')
    call check_true(short == 'T%', 'omp_get_affinity_format truncates: "'//short//'"')

    !$omp parallel num_threads(n) private(buffer, length, id, got)
    id = omp_get_thread_num()
    length = omp_capture_affinity(buffer, '%{thread_num}')
    call check_true(length >= 1 .and. length <= 3, 'omp_capture_affinity length')
    read (buffer, *) got
    call check_int(got, id, 'omp_capture_affinity %{thread_num}')
    length = omp_capture_affinity(buffer, '')
    call check_true(buffer(1:1) == 'T', 'omp_capture_affinity of the format set: "'//trim(buffer)//'"')
    !$omp end parallel
    call omp_set_affinity_format(saved)
  end subroutine check_affinity_format

  subroutine check_allocators()
    use, intrinsic :: iso_c_binding, only: c_ptr, c_associated, c_intptr_t, c_size_t
    type(omp_alloctrait) :: traits(2)
    integer(omp_allocator_handle_kind) :: a, a8
    type(c_ptr) :: p
    integer(c_intptr_t) :: address

    traits = [omp_alloctrait(omp_atk_alignment, 64), omp_alloctrait(omp_atk_fallback, omp_atv_null_fb)]
    a = omp_init_allocator(omp_default_mem_space, 2, traits)
    call check_true(a /= omp_null_allocator, 'omp_init_allocator with alignment 64')
    a8 = omp_init_allocator(omp_default_mem_space, 1_8, traits)
    call check_true(a8 /= omp_null_allocator, 'omp_init_allocator (ntraits 1_8)')
    call omp_destroy_allocator(a8)
    call omp_set_default_allocator(a)
    call check_true(omp_get_default_allocator() == a, 'omp_get_default_allocator after set')
    ! omp_null_allocator: the default just set, so 64-byte aligned.
    p = omp_alloc(100_c_size_t, omp_null_allocator)
    call check_true(c_associated(p), 'omp_alloc from the default allocator')
    address = transfer(p, address)
    call check_int(int(mod(address, 64_c_intptr_t)), 0, 'omp_alloc address mod 64')
    call omp_free(p, a)
    call omp_set_default_allocator(omp_default_mem_alloc)
    call check_true(omp_get_default_allocator() == omp_default_mem_alloc, &
                    'omp_get_default_allocator after omp_default_mem_alloc')
    call omp_destroy_allocator(a)
  end subroutine check_allocators

  ! Refused inside a region; between regions the runtime lets its threads go
  ! and the next region gets a full team again.
  subroutine check_pause(n)
    integer, intent(in) :: n
    integer :: size
    !$omp parallel num_threads(2)
    !$omp master
    call check_int(omp_pause_resource(omp_pause_soft, omp_get_initial_device()), -1, &
                   'omp_pause_resource in a region')
    !$omp end master
    !$omp end parallel
    call check_int(omp_pause_resource(omp_pause_soft, omp_get_initial_device()), 0, &
                   'omp_pause_resource between regions')
    call check_int(omp_pause_resource_all(omp_pause_hard), 0, 'omp_pause_resource_all between regions')
    size = 0
    !$omp parallel num_threads(n) shared(size)
    !$omp master
    size = omp_get_num_threads()
    !$omp end master
    !$omp end parallel
    call check_int(size, n, 'team after omp_pause_resource_all')
  end subroutine check_pause

end program fortran_api
