"""Lessons: short, tag-indexed notes that one task leaves for the next.

A lesson is a memory of kind 'lesson' with a type (pymem.vocabulary.LESSON_TYPES), tags, a stored
confidence, a version and the task that filed it. `file_lesson` writes it through the write gate,
or confirms a near-duplicate instead of adding a row (pymem.lessons.filing); `list_lessons` reads
lessons with their confidence decayed for age by the database, at read time only;
`lessons_for_task` ranks the lessons that fit a task and renders the best of them inside the
delivery envelope (pymem.lessons.selection); `deliver_with_lessons`, the turn every surface runs
(the command line, the service, the MCP `deliver` tool), puts them into a session's turn, whose
injection record names them (pymem.lessons.delivery_turn).
"""

from .delivery_turn import deliver_with_lessons
from .filing import FiledLesson, Lesson, file_lesson, list_lessons
from .selection import DEFAULT_CACHE, LessonCache, LessonsForTask, excluded_roles, lessons_for_task

__all__ = ["FiledLesson", "Lesson", "file_lesson", "list_lessons", "LessonCache", "LessonsForTask",
           "lessons_for_task", "excluded_roles", "DEFAULT_CACHE", "deliver_with_lessons"]
